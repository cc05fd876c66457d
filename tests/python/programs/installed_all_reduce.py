"""Two ranks (processes started here) all_reduce over an installed
cohort_torch; each prints where cohort_torch and libcohort were loaded
from, for tests/python/test_install.py. With --no-import the program never
imports cohort_torch: torch's entry point of an installed wheel must make
"cohort" a backend name by itself."""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, port, import_it):
    if import_it:
        import cohort_torch  # noqa: F401
    elif "cohort_torch" in sys.modules:
        sys.exit("cohort_torch was imported before the first cohort group: torch's entry point must not load it")

    dist.init_process_group("cohort", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    import cohort_torch  # imported by now either way: where from

    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    with open("/proc/self/maps") as maps:
        libcohort = sorted({line.split()[-1] for line in maps if "libcohort.so" in line})
    line = f"rank {rank} sum {t.tolist()} module {os.path.dirname(cohort_torch.__file__)} lib {libcohort}\n"
    os.write(1, line.encode())  # one write, so that the two ranks' lines never interleave
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(rank_main, args=(port, "--no-import" not in sys.argv), nprocs=2, start_method="spawn")
    sys.exit(0)
