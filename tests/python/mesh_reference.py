"""torch's own DeviceMesh, for tests/process_group/groups_process_test.cc.

Run as one rank of 4 or 6 (env://, gloo): prints, for three meshes, one line of
what torch 2.13 says of each (its repr, this rank's coordinate, local
ranks, the ranks of its group along each dimension, sub-meshes), in the
format groups_worker's mesh-print mode prints cohort's, so that the test
compares the two line by line.
"""
import os
import sys
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def line(name, mesh, subs):
    coordinate = list(mesh.get_coordinate())
    local = [mesh.get_local_rank(d) for d in range(mesh.ndim)]
    groups = [dist.get_process_group_ranks(g) for g in mesh.get_all_groups()]
    sub_text = " ".join(f"{repr(s)}={s.mesh.flatten().tolist()}" for s in subs)
    return f"{name}: {repr(mesh)} coordinate={coordinate} local={local} groups={groups} subs: {sub_text}"


dist.init_process_group("gloo")
rank = dist.get_rank()
cols = dist.get_world_size() // 2  # 2 x 2 at 4 ranks, 2 x 3 at 6
square = init_device_mesh("cpu", (2, cols), mesh_dim_names=("dp", "tp"))
flat = init_device_mesh("cpu", (dist.get_world_size(),))
hsdp = init_device_mesh("cpu", (1, 2, cols), mesh_dim_names=("rep", "dp", "tp"))
print(f"rank {rank} " + line("square", square, [square["tp"], square["dp"]]), flush=True)
print(f"rank {rank} " + line("flat", flat, []), flush=True)
print(f"rank {rank} " + line("hsdp", hsdp, [hsdp["rep", "tp"], hsdp["dp", "tp"]]), flush=True)
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
