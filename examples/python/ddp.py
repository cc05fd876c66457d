"""torch's DistributedDataParallel over cohort: the PyTorch tutorial's
synchronous SGD on generated data, with "cohort" where the tutorial has
"gloo". Run it with a launcher:

    build/tools/cohortrun --standalone --nproc-per-node 2 examples/python/ddp.py --steps 50
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F

import cohort_torch  # noqa: F401  (registers the backend)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--backend", default="cohort", choices=["cohort", "gloo"])
    args = parser.parse_args()
    dist.init_process_group(args.backend)
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts it anyway)
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    # Each rank its own shard of a separable problem: the label is whether
    # the first feature is positive.
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(512, 20, generator=g)
    y = (x[:, 0] > 0).long()
    for step in range(args.steps):
        batch = torch.randint(0, 512, (32,), generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x[batch]), y[batch])
        loss.backward()
        opt.step()
        if step == 0 or step == args.steps - 1:
            mean = loss.detach().clone()
            dist.all_reduce(mean, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step}: mean loss over {dist.get_world_size()} ranks {mean.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
