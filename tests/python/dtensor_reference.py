"""torch's own DTensor, for tests/torch/dtensor_process_test.cc.

Run as one rank of 4 (env://, gloo): lays the same 10 x 6 tensor out as
tests/torch/dtensor_worker's compare mode does and prints, a line each,
every local piece and gradient, in the format that mode prints cohort's,
so that the test compares the two line by line.
"""
import os
import sys
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor


def line(name, t):
    values = " ".join(f"{v:.1f}" for v in t.detach().flatten().tolist())
    return f"{name}: {list(t.shape)} {values}"


dist.init_process_group("gloo")
torch.set_num_threads(1)
r = dist.get_rank()
k = dist.get_world_size()
base = torch.arange(60, dtype=torch.double).reshape(10, 6)
coefficient = torch.arange(60, dtype=torch.double).reshape(10, 6) * 0.5
mesh = init_device_mesh("cpu", (k,))
out = []
rows = distribute_tensor(base + r, mesh, [Shard(0)])
out.append(line("Shard(0)", rows.to_local()))
out.append(line("Shard(0) -> Shard(1)", rows.redistribute(mesh, [Shard(1)]).to_local()))
partial = DTensor.from_local(base * (r + 1), mesh, [Partial()])
out.append(line("Partial -> Replicate", partial.redistribute(mesh, [Replicate()]).to_local()))
out.append(line("Partial -> Shard(0)", partial.redistribute(mesh, [Shard(0)]).to_local()))
mean = DTensor.from_local(base * (r + 1), mesh, [Partial("avg")])
out.append(line("Partial(avg) -> Replicate", mean.redistribute(mesh, [Replicate()]).to_local()))
w = distribute_tensor(base.clone().requires_grad_(), mesh, [Shard(0)])
(w.redistribute(mesh, [Replicate()]).to_local() * coefficient).sum().backward()
out.append(line("grad of Shard(0) -> Replicate", w.grad.to_local()))
x = (base * (r + 1)).requires_grad_()
s = DTensor.from_local(x, mesh, [Partial()]).redistribute(mesh, [Shard(0)])
start = min(10, 3 * r)
(s.to_local() * coefficient[start : start + s.to_local().shape[0]]).sum().backward()
out.append(line("grad of Partial -> Shard(0)", x.grad))
square = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
grid = distribute_tensor(base, square, [Shard(0), Shard(1)])
out.append(line("(Shard(0), Shard(1))", grid.to_local()))
out.append(line("-> (Shard(1), Shard(0))", grid.redistribute(square, [Shard(1), Shard(0)]).to_local()))
out.append(line("(Replicate(), Shard(0))", distribute_tensor(base, square, [Replicate(), Shard(0)]).to_local()))
for text in out:
    print(f"rank {r} {text}", flush=True)
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
