"""torch's fully_shard (FSDP2) on a DeviceMesh over cohort: each rank
holds a shard of every layer's parameters; the mesh's groups are cohort
groups. Run it with a launcher:

    build/tools/cohortrun --standalone --nproc-per-node 2 examples/python/fsdp2.py
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import cohort_torch  # noqa: F401  (registers the backend)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    dist.init_process_group("cohort")
    rank, size = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (size,), mesh_dim_names=("shard",))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    local = sum(p.to_local().numel() for p in model.parameters())
    total = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"rank 0 holds {local} of {total} parameters", flush=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(rank)
    for step in range(args.steps):
        x = torch.randn(32, 20, generator=g)
        y = (x[:, 0] > 0).long()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and (step == 0 or step == args.steps - 1):
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
