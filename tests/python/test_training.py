"""torch's own parallelism over "cohort" and over "gloo", same seed and
data: DistributedDataParallel, fully_shard (FSDP2) on a 1-D and a 2-D mesh,
a tensor-parallel MLP, DTensor redistribution and a pipelining schedule.
Real processes, real torch 2.13.

Run by ctest (python.training) with PYTHONPATH naming build/python.
"""

import sys

import pytest
import torch
import torch.distributed as dist

import cohort_torch  # noqa: F401  (registers the backend)
from ranks import run_ranks


# torch's own DistributedDataParallel and fully_shard (FSDP2) over cohort
# and over gloo, same seed and data: the same parameters after the steps.
# Tolerance: rtol 1e-5 / atol 1e-6, float32 with the reductions' order the
# only difference (a ring or a tree against direct shared memory).


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _batch(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def _train(model, rank, steps, momentum=0.9):
    """SGD steps on this rank's batches; the parameters as full lists (a
    tensor sent back would outlive its process's shared memory)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
    for step in range(steps):
        x, y = _batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    full = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
    return [p.detach().tolist() for p in full]


def ddp_training(rank, size):
    return _train(torch.nn.parallel.DistributedDataParallel(_model()), rank, 5)


def fsdp_training(rank, size):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (size,))
    model = _model()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return _train(model, rank, 5)


@pytest.mark.parametrize("training", [ddp_training, fsdp_training], ids=["ddp", "fully_shard"])
def test_torch_training_over_cohort_equals_over_gloo(training):
    over_cohort = run_ranks(training, 2, backend="cohort")
    over_gloo = run_ranks(training, 2, backend="gloo")
    for rank in range(2):
        for a, b in zip(over_cohort[rank], over_gloo[rank]):
            torch.testing.assert_close(torch.tensor(a), torch.tensor(b), rtol=1e-5, atol=1e-6)
    # Every rank ends with the same model, and it moved from the start.
    start = [p.detach() for p in _model().parameters()]
    for a, b in zip(over_cohort[0], over_cohort[1]):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), rtol=0, atol=0)
    assert any(not torch.equal(torch.tensor(a), s) for a, s in zip(over_cohort[0], start))


def hsdp_training(rank, size):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    # 2 x 2: replicate across the first dimension, shard across the second
    # (DeviceMesh makes a subgroup per row and per column: cohort groups).
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    model = _model()
    fully_shard(model, mesh=mesh)
    return _train(model, rank, 3, momentum=0.0)


def tensor_parallel_mlp(rank, size):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (size,))
    model = _model()
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x, y = _batch(0, 0)  # every rank the same batch, as tensor parallelism needs
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.item(), [p.grad.full_tensor().tolist() for p in model.parameters()]


def dtensor_redistribute(rank, size):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (size,))
    full = torch.arange(6 * 5, dtype=torch.float32).reshape(6, 5)  # 6 rows: uneven over 4 ranks
    placements = [Shard(0), Shard(1), Replicate()]
    seen = []
    for a in placements:
        for b in placements:
            d = distribute_tensor(full, mesh, [a]).redistribute(mesh, [b])
            seen.append(torch.equal(d.full_tensor(), full))
    # Partial -> Replicate sums the ranks' parts (all_reduce); Partial ->
    # Shard sums and scatters (reduce_scatter).
    total = float(size * (size + 1) // 2)
    part = DTensor.from_local(torch.full((4 * size,), float(rank + 1)), mesh, [Partial()])
    seen.append(part.redistribute(mesh, [Replicate()]).to_local().tolist() == [total] * (4 * size))
    seen.append(part.redistribute(mesh, [Shard(0)]).to_local().tolist() == [total] * 4)
    return seen


def test_hsdp_on_a_two_by_two_mesh_over_cohort_equals_over_gloo():
    over_cohort = run_ranks(hsdp_training, 4, backend="cohort")
    over_gloo = run_ranks(hsdp_training, 4, backend="gloo")
    for rank in range(4):
        for a, b in zip(over_cohort[rank], over_gloo[rank]):
            torch.testing.assert_close(torch.tensor(a), torch.tensor(b), rtol=1e-5, atol=1e-6)


def test_tensor_parallel_mlp_matches_the_single_process_model():
    model = _model()
    x, y = _batch(0, 0)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    expected = [p.grad for p in model.parameters()]
    for rank, (tp_loss, grads) in run_ranks(tensor_parallel_mlp, 2).items():
        assert abs(tp_loss - loss.item()) < 1e-5, (rank, tp_loss, loss.item())
        for g, e in zip(grads, expected):
            torch.testing.assert_close(torch.tensor(g), e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [2, 4])
def test_dtensor_redistributes_between_every_placement_pair(size):
    for rank, seen in run_ranks(dtensor_redistribute, size).items():
        assert all(seen), (rank, seen)


def pipeline_two_stages(rank, size):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    full = _model()
    stage_module = torch.nn.Sequential(full[0], full[1]) if rank == 0 else torch.nn.Sequential(full[2])
    stage = PipelineStage(stage_module, rank, size, torch.device("cpu"))
    schedule = ScheduleGPipe(stage, n_microbatches=4, loss_fn=torch.nn.functional.cross_entropy)
    x, y = _batch(0, 0)
    losses = []
    if rank == 0:
        schedule.step(x)
    else:
        schedule.step(target=y, losses=losses)
    return [p.grad.tolist() for p in stage_module.parameters()], [loss.item() for loss in losses]


def test_a_two_stage_gpipe_schedule_over_cohort_equals_over_gloo():
    over_cohort = run_ranks(pipeline_two_stages, 2, backend="cohort")
    over_gloo = run_ranks(pipeline_two_stages, 2, backend="gloo")
    assert len(over_cohort[1][1]) == 4  # a loss per microbatch, on the last stage
    for rank in range(2):
        grads_c, losses_c = over_cohort[rank]
        grads_g, losses_g = over_gloo[rank]
        assert losses_c == pytest.approx(losses_g, rel=1e-6)
        for a, b in zip(grads_c, grads_g):
            torch.testing.assert_close(torch.tensor(a), torch.tensor(b), rtol=1e-6, atol=1e-7)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
