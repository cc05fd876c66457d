"""Tensor-parallel training on CPU (issue 40): torch's own tensor
parallelism (`parallelize_module` with `ColwiseParallel`/`RowwiseParallel`,
Megatron-style MLP blocks) from Python, one process against TP over gloo
and TP over cohort, side by side.

    python3 bench/python/tp_train.py [--reps 3] [--tp 2] [--steps 20] [--hidden 1024]

Needs build/python on PYTHONPATH (cohort_torch). Each run is a fresh
torchrun job with one thread per rank; runs alternate between the setups,
REPS times. The model: BLOCKS residual blocks of Linear(hidden, 4*hidden) ->
GELU -> Linear(4*hidden, hidden), the first colwise and the second rowwise
(one all_reduce forward and one backward per block), batch 8 x 32 tokens,
MSE loss against a fixed target, SGD. Prints the median step time and the
ratios, and checks that every setup's losses match one process's (float32,
relative 1e-4: TP sums in another order).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tp_common import join, launch  # noqa: E402

BLOCKS = 4
BATCH, SEQ = 8, 32


def worker(backend, hidden, steps, out):
    torch, _ = join(backend)
    torch.manual_seed(0)
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(hidden, 4 * hidden)
            self.down = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(x)))

    model = nn.Sequential(*[Block() for _ in range(BLOCKS)])
    x = torch.randn(BATCH, SEQ, hidden)
    target = torch.randn(BATCH, SEQ, hidden)
    rank = 0
    if backend != "none":
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        rank = dist.get_rank()
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for block in model:
            parallelize_module(block, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - start)
    if rank == 0:
        with open(out, "w") as f:
            # The first steps warm up (allocations, DTensor's caches).
            json.dump({"losses": losses, "step_ms": 1000 * statistics.median(times[3:])}, f)
    if backend != "none":
        torch.distributed.destroy_process_group()


def run(setup, nproc, hidden, steps, tmp):
    return launch(__file__, setup, nproc, [hidden, steps], os.path.join(tmp, f"{setup}.json"))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--steps", type=int, default=13)
    p.add_argument("--hidden", type=int, default=1024)
    args = p.parse_args()
    setups = ["none", "gloo", "cohort"]
    results = {s: [] for s in setups}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.reps):
            for s in setups:
                results[s].append(run(s, args.tp, args.hidden, args.steps, tmp))
    reference = results["none"][0]["losses"]
    same = all(abs(a - b) <= 1e-4 * abs(b) for s in setups for r in results[s]
               for a, b in zip(r["losses"], reference))
    med = {s: statistics.median(r["step_ms"] for r in results[s]) for s in setups}
    names = {"none": "one process", "gloo": f"TP={args.tp} over gloo", "cohort": f"TP={args.tp} over cohort"}
    print(f"# torch tensor parallel training on CPU: {BLOCKS} MLP blocks, hidden {args.hidden}, batch {BATCH}x{SEQ}, "
          f"float32, 1 thread per rank; median step of {args.steps - 3} steps, medians of {args.reps} runs\n")
    print("| run | step (ms) | one process / this | gloo / this |")
    print("|---|---|---|---|")
    for s in setups:
        print(f"| {names[s]} | {med[s]:.1f} | {med['none'] / med[s]:.2f} | {med['gloo'] / med[s]:.2f} |")
    print(f"\nlosses match one process's (relative 1e-4) in every run: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
