"""PyTorch tutorial's blocking point-to-point and group all_reduce, as a
script a launcher starts (env://), with "cohort" for "gloo". Prints one
line per rank that tests/python/test_launcher.py checks."""

import sys

import torch
import torch.distributed as dist

import cohort_torch  # noqa: F401  (registers the backend)

dist.init_process_group("cohort")
rank, size = dist.get_rank(), dist.get_world_size()
tensor = torch.zeros(1)
if rank == 0:
    tensor += 1
    dist.send(tensor=tensor, dst=1)
elif rank == 1:
    dist.recv(tensor=tensor, src=0)
group = dist.new_group(list(range(size)))
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
print(f"rank {rank} of {size}: p2p {tensor.item()} sum {total.item()} args {sys.argv[1:]}", flush=True)
dist.destroy_process_group()
