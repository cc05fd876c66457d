"""torch's DistributedDataParallel on CPU, as a launcher (torchrun) starts
it: env://, one process per rank.

    torchrun --nproc-per-node 2 ddp_train.py BACKEND OUT.json

BACKEND is what the program asks torch for (gloo or cohort). Rank 0 writes
the losses, a checksum of the trained weights and the class of the backend
torch made (with COHORT_AS_GLOO=1, "gloo" is cohort's)."""

import json
import sys

import torch
from leave import leave
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

backend, out = sys.argv[1], sys.argv[2]
if backend == "cohort":
    import cohort_torch  # noqa: F401  (registers the backend)

torch.set_num_threads(1)
dist.init_process_group(backend)
rank, size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(100 + rank)
losses = []
for step in range(8):
    x = torch.randn(32, 16, generator=g)
    loss = torch.nn.functional.mse_loss(model(x), x[:, :4].flip(1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    losses.append(mean.item() / size)
if rank == 0:
    pg_class = type(dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))).__name__
    with open(out, "w") as f:
        json.dump({"losses": losses, "checksum": sum(p.double().sum().item() for p in model.parameters()),
                   "backend": dist.get_backend(), "pg_class": pg_class, "world": size}, f)
dist.barrier()
dist.destroy_process_group()
leave()  # without the interpreter's teardown: see leave.py
