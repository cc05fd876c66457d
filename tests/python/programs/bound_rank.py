"""A rank that says where it runs: its CPUs (os.sched_getaffinity) and
torch's intra-op threads, after init_process_group("cohort") and one
all_reduce. tests/python/test_launcher.py starts it under torchrun, which
binds nothing, so that cohort binds it (COHORT_BIND)."""

import os

import torch
import torch.distributed as dist

import cohort_torch  # noqa: F401  (registers the backend)

# Threads torch runs before the group exists: binding must reach them too.
torch.ones(1 << 16).sum()
before = torch.get_num_threads()
dist.init_process_group("cohort")
total = torch.tensor([1.0])
dist.all_reduce(total)
cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
print(f"rank {dist.get_rank()}: cpus {cpus} threads {before}->{torch.get_num_threads()} sum {total.item()}", flush=True)
dist.destroy_process_group()
