"""Hugging Face accelerate's Accelerator, DDP on CPU, as `torchrun` (or
`accelerate launch`) starts it. accelerate picks gloo for CPU itself, so
the program never names a backend: with COHORT_AS_GLOO=1 its groups are
cohort's.

    torchrun --nproc-per-node 2 accelerate_train.py OUT.json

Rank 0 writes the losses (averaged over the ranks with accelerate's
gather), the weights' checksum and the class of torch's backend."""

import json
import sys

import torch
from leave import leave
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

out = sys.argv[1]
torch.set_num_threads(1)
accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
g = torch.Generator().manual_seed(7)
x = torch.randn(128, 8, generator=g)
loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16, shuffle=False)
model, opt, loader = accelerator.prepare(model, opt, loader)
losses = []
for epoch in range(2):
    for xb, yb in loader:
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        accelerator.backward(loss)
        opt.step()
        losses.append(accelerator.gather(loss.detach().reshape(1)).mean().item())
if accelerator.is_main_process:
    import torch.distributed as dist

    pg_class = type(dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))).__name__
    with open(out, "w") as f:
        json.dump({"losses": losses, "world": accelerator.num_processes, "backend": dist.get_backend(),
                   "pg_class": pg_class,
                   "checksum": sum(p.double().sum().item() for p in accelerator.unwrap_model(model).parameters())},
                  f)
accelerator.wait_for_everyone()
accelerator.end_training()
leave()  # without the interpreter's teardown: see leave.py
