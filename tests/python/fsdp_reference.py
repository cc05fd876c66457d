"""torch's own fully_shard (FSDP2), for tests/torch/fsdp_process_test.cc.

Run as one rank (env://, gloo): trains the network of tests/torch/
fsdp_worker's compare mode (Linear(7, 10), ReLU, Linear(10, 3), seed 0,
each Linear a unit, the root last; SGD 0.1; three steps on the same
batches, each rank its 4 rows) and prints on rank 0, a line each, every
parameter whole, "param NAME v1 v2 ...", as that mode prints cohort's.
"""
import os
import sys
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
torch.set_num_threads(1)
r, k = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (k,))
torch.manual_seed(0)
first = nn.Linear(7, 10)
second = nn.Linear(10, 3)
model = nn.Sequential(first, nn.ReLU(), second)
fully_shard(first, mesh=mesh)
fully_shard(second, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    torch.manual_seed(1000 + step)
    x, y = torch.randn(4 * k, 7), torch.randn(4 * k, 3)
    opt.zero_grad()
    F.mse_loss(model(x[4 * r:4 * r + 4]), y[4 * r:4 * r + 4]).backward()
    opt.step()
for name, p in model.named_parameters():
    whole = p.full_tensor()
    if r == 0:
        print("param " + name + " " + " ".join(f"{v:.9g}" for v in whole.flatten().tolist()), flush=True)
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
