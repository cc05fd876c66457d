"""host_collectives: one rank of a multi-host collective benchmark
(bench/multi_host.sh starts one per rank inside each host's network
namespace). torch.distributed from Python over "cohort" (import
cohort_torch) or "gloo", joined through env:// (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT). Rank 0 prints one line per size:

    collective size_bytes time_us

where size is what cohort-bench counts (each rank's buffer for all_reduce
and broadcast, the whole gathered tensor for all_gather, the whole input
for reduce_scatter, each rank's whole send buffer for all_to_all), float32,
SUM, root 0, the median over ITERS timed calls each ended by the slowest
rank (a barrier-free loop: every call is a collective, so the next one
cannot start before the last rank finished the previous one).

    host_collectives.py BACKEND COLLECTIVE MIN_BYTES MAX_BYTES [ITERS]
"""

import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    backend, collective = sys.argv[1], sys.argv[2]
    lo, hi = int(sys.argv[3]), int(sys.argv[4])
    iters = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    torch.set_num_threads(1)
    if backend == "cohort":
        import cohort_torch  # noqa: F401
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    size = max(lo, 4)
    while size <= hi:
        n = max(1, size // 4)
        if collective == "all_reduce":
            buf = torch.ones(n)
            call = lambda: dist.all_reduce(buf)  # noqa: E731
        elif collective == "broadcast":
            buf = torch.ones(n)
            call = lambda: dist.broadcast(buf, 0)  # noqa: E731
        elif collective == "all_gather":
            n = max(world, n - n % world)
            out, inp = torch.empty(n), torch.ones(n // world)
            call = lambda: dist.all_gather_into_tensor(out, inp)  # noqa: E731
        elif collective == "reduce_scatter":
            n = max(world, n - n % world)
            out, inp = torch.empty(n // world), torch.ones(n)
            call = lambda: dist.reduce_scatter_tensor(out, inp)  # noqa: E731
        elif collective == "all_to_all":
            n = max(world, n - n % world)
            out, inp = torch.empty(n), torch.ones(n)
            call = lambda: dist.all_to_all_single(out, inp)  # noqa: E731
        else:
            sys.exit(f"unknown collective {collective}")
        # Big sizes take long on a shaped link: fewer calls.
        count = iters or max(3, min(200, int(2e8 // max(size, 1))))
        for _ in range(2):
            call()
        times = []
        for _ in range(count):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        # Each rank's median, the slowest rank's counts.
        mine = torch.tensor([statistics.median(times)], dtype=torch.float64)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"{collective} {n * 4} {mine.item() * 1e6:.1f}", flush=True)
        size *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
