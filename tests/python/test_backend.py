"""cohort as a torch.distributed backend, from Python: real processes started
by torch.multiprocessing (spawn, as PyTorch's tutorial does), real torch
2.13, every result checked against values computed here.

Run by ctest (python.Backend) with PYTHONPATH naming build/python.
"""

import datetime
import os
import sys

import pytest
import torch
import torch.distributed as dist

import cohort_torch  # noqa: F401  (registers the backend)
from ranks import run_ranks


# The programs of PyTorch's distributed tutorial, with "cohort" for "gloo".


def tutorial_blocking_p2p(rank, size):
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        dist.send(tensor=tensor, dst=1)
    else:
        dist.recv(tensor=tensor, src=0)
    return tensor[0].item()


def tutorial_nonblocking_p2p(rank, size):
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        req = dist.isend(tensor=tensor, dst=1)
    else:
        req = dist.irecv(tensor=tensor, src=0)
    req.wait()
    return tensor[0].item()


def tutorial_group_all_reduce(rank, size):
    group = dist.new_group([0, 1])
    tensor = torch.ones(1)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor[0].item()


def tutorial_ring_all_reduce(rank, size):
    # The tutorial's allreduce(send, recv), built from isend and recv.
    send = torch.full((5,), float(rank + 1))
    recv = torch.zeros(5)
    accum = send.clone()
    send_buff, recv_buff = send.clone(), torch.zeros(5)
    left, right = (rank - 1 + size) % size, (rank + 1) % size
    for i in range(size - 1):
        if i % 2 == 0:
            req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        req.wait()
    recv[:] = accum[:]
    return recv.tolist()


# The point-to-point programs are written for two processes (rank 0 sends,
# every other rank receives once).
def test_the_torch_internals_the_python_layer_reads_are_there():
    """Named one by one, so that a torch release that drops one fails here with
    its name and the torch version, not somewhere inside a job."""
    import inspect

    import torch.distributed.distributed_c10d as c10d

    helper = getattr(c10d, "_new_process_group_helper", None)
    where = f"torch {torch.__version__}"
    assert helper is not None, f"{where}: distributed_c10d._new_process_group_helper is gone"
    local_names = helper.__code__.co_varnames
    for name in ("backend_config", "group_name"):  # cohort_torch._group_being_made
        assert name in local_names, f"{where}: _new_process_group_helper has no local '{name}'"
    # The gloo stand-in (as_gloo.py): torch must build gloo groups through the module's name.
    assert "ProcessGroupGloo(" in inspect.getsource(helper), f"{where}: gloo groups no longer built by name"
    assert hasattr(c10d, "_GLOO_AVAILABLE"), f"{where}: distributed_c10d._GLOO_AVAILABLE is gone"


def what_the_group_maker_reads_of_torch(rank, size):
    world = dist.group.WORLD
    mixed = dist.new_group(backend="cpu:cohort,cuda:gloo")  # another backend for another device
    return {"world": [world.name(), type(world._get_backend(torch.device("cpu"))).__name__],
            "mixed_cpu": type(mixed._get_backend(torch.device("cpu"))).__name__,
            "mixed_cuda": type(mixed._get_backend(torch.device("cuda"))).__name__}


def test_the_torch_internal_the_group_maker_reads_is_there():
    """cohort_torch reads one private thing of torch's: the device->backend map
    of the group torch is making, from the locals of its
    _new_process_group_helper (cohort_torch._group_being_made: torch hands a
    backend's creator no such map). With it a cohort-only group is cohort's
    ProcessGroup (named "cohort", with sequence numbers) and a mixed one gets
    torch's, holding each device's backend. Without it both still work, the
    cohort-only one as torch's "custom" group: this test is what notices."""
    out = run_ranks(what_the_group_maker_reads_of_torch, 2)
    for rank in range(2):
        got = out[rank]
        assert got["world"] == ["cohort", "ProcessGroupCohort"], (
            f"torch {torch.__version__}: _new_process_group_helper no longer has the locals backend_config and "
            f"group_name that cohort_torch._group_being_made reads; the default group came out as {got['world']}")
        assert got["mixed_cpu"] == "ProcessGroupCohort" and got["mixed_cuda"] == "ProcessGroupGloo", got


def test_tutorial_blocking_point_to_point():
    assert run_ranks(tutorial_blocking_p2p, 2) == {0: 1.0, 1: 1.0}


def test_tutorial_nonblocking_point_to_point():
    assert run_ranks(tutorial_nonblocking_p2p, 2) == {0: 1.0, 1: 1.0}


@pytest.mark.parametrize("size", [2, 3])
def test_tutorial_group_all_reduce(size):
    out = run_ranks(tutorial_group_all_reduce, size)
    # Ranks 0 and 1 sum their ones; rank 2 is not in the group, and torch
    # makes the call a no-op for it.
    assert out[0] == 2.0 and out[1] == 2.0
    if size == 3:
        assert out[2] == 1.0


@pytest.mark.parametrize("size", [2, 3])
def test_tutorial_ring_all_reduce(size):
    expected = [float(sum(range(1, size + 1)))] * 5
    assert run_ranks(tutorial_ring_all_reduce, size) == {r: expected for r in range(size)}


# Every collective, checked against values computed from the ranks.


def every_collective(rank, size):
    checks = {}
    t = torch.arange(4, dtype=torch.float32) + rank
    dist.all_reduce(t)
    checks["all_reduce"] = t.tolist()
    m = torch.tensor([rank + 1], dtype=torch.int64)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    checks["all_reduce_max"] = m.item()
    p = torch.tensor([rank + 2.0], dtype=torch.float64)
    dist.all_reduce(p, op=dist.ReduceOp.PRODUCT)
    checks["all_reduce_product"] = p.item()
    b = torch.full((3,), float(rank))
    dist.broadcast(b, src=size - 1)
    checks["broadcast"] = b.tolist()
    r = torch.tensor([float(rank)])
    dist.reduce(r, dst=0)
    checks["reduce"] = r.item() if rank == 0 else None
    gathered = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(gathered, torch.tensor([rank, 10.0 * rank]))
    checks["all_gather"] = [g.tolist() for g in gathered]
    flat = torch.zeros(2 * size, dtype=torch.int32)
    dist.all_gather_into_tensor(flat, torch.tensor([rank, rank], dtype=torch.int32))
    checks["all_gather_into_tensor"] = flat.tolist()
    glist = [torch.zeros(1) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.tensor([rank * 3.0]), gather_list=glist, dst=0)
    checks["gather"] = [g.item() for g in glist] if rank == 0 else None
    s = torch.zeros(1)
    dist.scatter(s, scatter_list=[torch.tensor([q * 5.0]) for q in range(size)] if rank == 0 else None, src=0)
    checks["scatter"] = s.item()
    rs = torch.zeros(2)
    dist.reduce_scatter(rs, [torch.full((2,), float(rank * size + q)) for q in range(size)])
    checks["reduce_scatter"] = rs.tolist()
    rst = torch.zeros(1)
    dist.reduce_scatter_tensor(rst, torch.arange(size, dtype=torch.float32) * (rank + 1))
    checks["reduce_scatter_tensor"] = rst.item()
    a2a_out = torch.zeros(size)
    dist.all_to_all_single(a2a_out, torch.arange(size, dtype=torch.float32) + 100 * rank)
    checks["all_to_all_single"] = a2a_out.tolist()
    outs = [torch.zeros(1) for _ in range(size)]
    dist.all_to_all(outs, [torch.tensor([rank * 10.0 + q]) for q in range(size)])
    checks["all_to_all"] = [o.item() for o in outs]
    work = dist.all_reduce(torch.ones(8), async_op=True)
    work.wait()
    fut = dist.all_reduce(torch.ones(2), async_op=True).get_future()
    checks["future"] = fut.wait()[0].tolist()
    dist.barrier()
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "name": "r" * (rank + 1)})
    checks["all_gather_object"] = objs
    return checks


@pytest.mark.parametrize("size", [2, 3])
def test_every_collective_gives_the_values_computed_here(size):
    out = run_ranks(every_collective, size)
    n = size
    total = n * (n - 1) / 2
    for rank in range(n):
        c = out[rank]
        assert c["all_reduce"] == [k * n + total for k in range(4)]
        assert c["all_reduce_max"] == n
        prod = 1.0
        for q in range(n):
            prod *= q + 2
        assert c["all_reduce_product"] == prod
        assert c["broadcast"] == [float(n - 1)] * 3
        assert c["all_gather"] == [[float(q), 10.0 * q] for q in range(n)]
        assert c["all_gather_into_tensor"] == [q for q in range(n) for _ in range(2)]
        assert c["scatter"] == rank * 5.0
        assert c["reduce_scatter"] == [float(sum(q * n + rank for q in range(n)))] * 2
        assert c["reduce_scatter_tensor"] == float(rank * sum(q + 1 for q in range(n)))
        assert c["all_to_all_single"] == [float(q * 100 + rank) for q in range(n)]
        assert c["all_to_all"] == [q * 10.0 + rank for q in range(n)]
        assert c["future"] == [float(n)] * 2
        assert c["all_gather_object"] == [{"rank": q, "name": "r" * (q + 1)} for q in range(n)]
    assert out[0]["reduce"] == total
    assert out[0]["gather"] == [q * 3.0 for q in range(n)]


def complex_and_uint32_all_reduce(rank, size):
    # torch itself turns a complex SUM into one over the real view.
    c = torch.full((2,), complex(1, rank), dtype=torch.complex64)
    dist.all_reduce(c)
    try:
        dist.all_reduce(torch.zeros(2, dtype=torch.uint32))
    except RuntimeError as e:
        return c.tolist(), str(e)
    return c.tolist(), "accepted"


def test_an_unsupported_dtype_raises_runtime_error_naming_it():
    out = run_ranks(complex_and_uint32_all_reduce, 2)
    for complex_sum, message in out.values():
        assert complex_sum == [complex(2, 1)] * 2
        assert "all_reduce's tensor has dtype UInt32" in message, message


# torch's Work API on cohort's Works.


def work_api(rank, size):
    checks = {}
    t = torch.full((4,), float(rank))
    work = dist.all_reduce(t, async_op=True)
    checks["wait"] = work.wait()
    checks["completed"] = work.is_completed()
    checks["success"] = work.is_success()
    checks["exception"] = work.exception()
    checks["result"] = [r.tolist() for r in work.result()]
    if rank == 0:
        # A receive from any source: torch asks the backend's recvAnysource
        # and returns the sender's rank.
        got = torch.zeros(1)
        senders = sorted(dist.recv(got) for _ in range(size - 1))
        checks["senders"] = senders
    else:
        dist.send(torch.tensor([float(rank)]), dst=0)
    return checks


def test_work_reports_completion_success_result_and_the_source_of_an_any_source_recv():
    out = run_ranks(work_api, 3)
    for rank, c in out.items():
        assert c["wait"] is True and c["completed"] and c["success"], c
        assert c["exception"] is None
        assert c["result"] == [[3.0] * 4]
    assert out[0]["senders"] == [1, 2]


# A dead peer: every survivor's call raises, naming the rank that died.


def all_reduce_until_a_rank_dies(rank, size):
    import signal
    import time

    t = torch.ones(1024)
    for i in range(1_000_000):
        if rank == size - 1 and i == 200:
            os.kill(os.getpid(), signal.SIGKILL)
        start = time.monotonic()
        try:
            t.fill_(1.0)
            dist.all_reduce(t)
        except RuntimeError as e:
            # torch's class for a dead peer, as its own backends raise it.
            return time.monotonic() - start, f"{type(e).__name__}: {e}"
    return None, "no error"


def test_a_killed_rank_fails_every_survivor_naming_it():
    out = run_ranks(all_reduce_until_a_rank_dies, 4, killed=(3,))
    assert sorted(out) == [0, 1, 2]
    for rank, (seconds, message) in out.items():
        assert message.startswith("DistNetworkError: "), f"rank {rank}: {message}"
        assert "rank 3" in message, f"rank {rank}: {message}"
        # Well before the group's 60 s timeout: the connection's end told.
        assert seconds is not None and seconds < 30, f"rank {rank} took {seconds} s: {message}"


# Errors keep their kind: a timeout and a desync are torch's
# DistBackendError, as torch's NCCL backend raises them, from a blocking
# call and from an async one's wait() and future.


def late_rank_and_mismatch(rank, size):
    import time

    group = dist.new_group(timeout=datetime.timedelta(seconds=2))
    kinds = {}
    if rank == 1:
        time.sleep(3)  # misses the first all_reduce's 2 s on rank 0
    else:
        try:
            dist.all_reduce(torch.ones(4), group=group)
            kinds["blocking"] = "passed"
        except RuntimeError as e:
            kinds["blocking"] = (type(e).__name__, str(e))
    return kinds


def test_a_timeout_is_torchs_dist_backend_error():
    out = run_ranks(late_rank_and_mismatch, 2)
    kind, message = out[0]["blocking"]
    assert kind == "DistBackendError", (kind, message)
    assert isinstance(dist.DistBackendError("x"), RuntimeError)
    assert "all_reduce" in message and "ranks [1]" in message, message


def async_timeout(rank, size):
    import time

    group = dist.new_group(timeout=datetime.timedelta(seconds=2))
    if rank == 1:
        time.sleep(3)
        return None
    out = {}
    work = dist.all_reduce(torch.ones(4), group=group, async_op=True)
    try:
        work.wait()
        out["wait"] = "passed"
    except RuntimeError as e:
        out["wait"] = type(e).__name__
    future = dist.all_reduce(torch.ones(4), group=group, async_op=True).get_future()
    try:
        future.wait()
        out["future"] = "passed"
    except RuntimeError as e:
        out["future"] = type(e).__name__
    return out


def test_an_async_timeout_is_dist_backend_error_from_wait_and_from_the_future():
    out = run_ranks(async_timeout, 2)
    assert out[0]["wait"] == "DistBackendError", out[0]
    assert out[0]["future"] == "DistBackendError", out[0]


# A bad argument is the ValueError torch raises for the same mistake, with
# cohort's message, and the group stays usable.


def bad_arguments(rank, size):
    out = {}
    wide = torch.arange(8.0).reshape(2, 4)
    try:
        dist.all_to_all_single(torch.empty(4, 2), wide.t())  # a transposed view: not contiguous
        out["all_to_all_single"] = "passed"
    except Exception as e:  # noqa: BLE001  (the kind is what is checked)
        out["all_to_all_single"] = (type(e).__name__, str(e))
    try:
        dist.all_reduce(wide.t())
        out["all_reduce"] = "passed"
    except Exception as e:  # noqa: BLE001
        out["all_reduce"] = (type(e).__name__, str(e))
    after = torch.ones(3)
    dist.all_reduce(after)
    out["after"] = after.tolist()
    return out


def test_a_non_contiguous_tensor_is_a_value_error_naming_it_and_the_group_goes_on():
    out = run_ranks(bad_arguments, 2)
    for rank in (0, 1):
        for op in ("all_to_all_single", "all_reduce"):
            kind, message = out[rank][op]
            assert kind == "ValueError", (rank, op, kind, message)
            assert "not contiguous" in message, (rank, op, message)
        assert out[rank]["after"] == [2.0, 2.0, 2.0], out[rank]


# destroy_process_group shuts the backend down: an operation still in
# flight ends first (abort() would fail it), and its result is there.


def destroy_with_an_operation_in_flight(rank, size):
    import time

    if rank == 1:
        time.sleep(1)  # rank 0's all_reduce is in flight meanwhile
    t = torch.full((1 << 16,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    dist.destroy_process_group()
    try:
        work.wait()
        waited = "passed"
    except Exception as e:  # noqa: BLE001  (the kind is what is checked)
        waited = f"{type(e).__name__}: {e}"
    return waited, t[0].item(), t[-1].item()


def test_destroy_process_group_lets_an_operation_in_flight_end():
    out = run_ranks(destroy_with_an_operation_in_flight, 2)
    for rank in (0, 1):
        assert out[rank] == ("passed", 3.0, 3.0), (rank, out[rank])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
