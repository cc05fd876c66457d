# fsdp_step.py: torch's fully_shard (FSDP2) step time over "gloo" or over
# "cohort": the MLP 784-2048-2048-10 of ddp_bench, each Linear its own
# unit and the root last, SGD with momentum, one thread per rank. Run it
# under cohortrun or torch.distributed.run (env://). Prints one line:
#   fsdp_bench <backend> world=P batch=B step_ms=median peak_mb=M
# peak_mb and held_mb: the growth of the process's resident high-water mark
# (VmHWM) and of its resident size between steps (VmRSS) from just before
# the model is made, as bench/fsdp_bench.cc measures them (run with
# MALLOC_MMAP_THRESHOLD_ fixed, as compare_fsdp.sh does).
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def status_mb(what):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(what + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="gloo", choices=["gloo", "cohort"])
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=30)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if a.backend == "cohort":
        import cohort_torch  # noqa: F401  (registers the backend)
    dist.init_process_group(a.backend)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))
    baseline = status_mb("VmRSS")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                          nn.Linear(2048, 10))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    times = []
    for _ in range(a.steps):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    result = torch.tensor([statistics.median(times), status_mb("VmHWM") - baseline, status_mb("VmRSS") - baseline],
                          dtype=torch.float64)
    dist.all_reduce(result, op=dist.ReduceOp.MAX)
    if dist.get_rank() == 0:
        print(f"fsdp_bench {a.backend} world={dist.get_world_size()} batch={a.batch} "
              f"step_ms={result[0].item():.2f} peak_mb={result[1].item():.1f} held_mb={result[2].item():.1f}",
              flush=True)
    # Every rank done before any leaves: rank 0 hosts the store, and a rank
    # still making its subgroups (those without rank 0) needs it.
    dist.barrier()
    dist.destroy_process_group()
    # Leave without the interpreter's teardown: gloo's threads may still be
    # destroying finished Works then, which can abort the process (see
    # tests/python/ranks.py).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
