"""What torch's Python reaches beyond the plain calls, over "cohort": its
coalescing (batch_isend_irecv and _coalescing_manager), monitored_barrier,
ProcessGroupGloo built by the program under the gloo stand-in,
symmetric memory (cohort_torch.empty_symmetric) and TORCH_DISTRIBUTED_DEBUG
turning on cohort's desync check. Real processes, values checked here.

Run by ctest (python.features) with PYTHONPATH naming build/python."""

import datetime
import sys
import time

import pytest
import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _coalescing_manager

import cohort_torch
from ranks import run_ranks


def torch_functions_beside_a_gloo_group(rank, size):
    """A gloo group beside the cohort default group, cohort_torch imported and
    the stand-in not installed: torch's functions and classes are torch's."""
    import torch.distributed.distributed_c10d as c10d
    from torch._C import _distributed_c10d as native

    gloo = dist.new_group(backend="gloo")
    timeout = datetime.timedelta(seconds=10)
    dist.monitored_barrier(group=gloo, timeout=timeout)  # torch's, over torch's Gloo
    try:
        dist.monitored_barrier(timeout=timeout)  # the cohort default group: torch's refusal, as for any non-gloo
        refused = None
    except ValueError as e:
        refused = str(e)
    t = torch.ones(2)
    dist.all_reduce(t, group=gloo)
    return {"own": [dist.monitored_barrier.__module__, dist.monitored_barrier is c10d.monitored_barrier],
            "gloo_class": [dist.ProcessGroupGloo is native.ProcessGroupGloo,
                           c10d.ProcessGroupGloo is native.ProcessGroupGloo],
            "gloo_backend": type(gloo._get_backend(torch.device("cpu"))).__name__,
            "options_added": hasattr(dist.ProcessGroup, "options"), "refused": refused, "sum": t.tolist()}


def test_importing_cohort_torch_leaves_torchs_functions_and_a_gloo_group_beside_it_as_torchs():
    out = run_ranks(torch_functions_beside_a_gloo_group, 2)
    for rank in range(2):
        got = out[rank]
        assert got["own"] == ["torch.distributed.distributed_c10d", True], got
        assert got["gloo_class"] == [True, True] and got["gloo_backend"] == "ProcessGroupGloo", got
        assert got["options_added"] is False, got
        assert got["refused"] == "monitored_barrier is only implemented for GLOO backend.", got
        assert got["sum"] == [2.0, 2.0]


def gloo_built_directly_under_the_stand_in(rank, size):
    from cohort_torch import ProcessGroupCohort, as_gloo

    store = dist.distributed_c10d._get_default_store()
    real = dist.new_group(backend="gloo")  # made before the stand-in: torch's Gloo, and stays so
    as_gloo.install()
    # As torch's c10d tests build one: gloo's options, with a device from gloo's API.
    opts = dist.ProcessGroupGloo._Options()
    opts._timeout = datetime.timedelta(seconds=20)
    opts._devices = [dist.ProcessGroupGloo.create_device(interface="lo")]
    by_options = dist.ProcessGroupGloo(dist.PrefixStore("a/", store), rank, size, opts)
    by_timeout = dist.ProcessGroupGloo(dist.PrefixStore("b/", store), rank, size, datetime.timedelta(seconds=20))
    sums = []
    for pg in (by_options, by_timeout):
        t = torch.full((3,), float(rank + 1))
        pg.allreduce([t]).wait()
        sums.append(t.tolist())
    device = by_options.create_device(interface="lo")  # asked of the group, as torch's DDP tests do
    stand_in = dist.new_group(backend="gloo")  # says "gloo", is cohort's: torch's own monitored_barrier runs
    dist.monitored_barrier(group=stand_in, timeout=datetime.timedelta(seconds=10))
    t = torch.ones(2)
    dist.all_reduce(t, group=real)
    return {"types": [type(pg).__name__ for pg in (by_options, by_timeout)],
            "gloo_like": [isinstance(pg, dist.ProcessGroupGloo) for pg in (by_options, by_timeout)],
            "cohort": [isinstance(pg, ProcessGroupCohort) for pg in (by_options, by_timeout)],
            "sums": sums, "device": type(device).__name__,
            "stand_in": type(stand_in._get_backend(torch.device("cpu"))).__name__,
            "real_is_gloo": type(real._get_backend(torch.device("cpu"))).__name__, "real_sum": t.tolist()}


def test_gloo_built_directly_is_a_cohort_group_under_the_stand_in_and_one_made_before_stays_gloos():
    out = run_ranks(gloo_built_directly_under_the_stand_in, 2)
    for rank in range(2):
        got = out[rank]
        assert got["types"] == ["ProcessGroupCohort"] * 2, got
        assert got["gloo_like"] == [True, True] and got["cohort"] == [True, True]
        assert got["sums"] == [[3.0] * 3] * 2
        assert got["device"] == "Device"
        assert got["stand_in"] == "ProcessGroupCohort"
        assert got["real_is_gloo"] == "ProcessGroupGloo" and got["real_sum"] == [2.0, 2.0]


def batched_ring(rank, size):
    send = torch.full((5,), float(rank))
    recv = torch.zeros(5)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % size), dist.P2POp(dist.irecv, recv, (rank - 1) % size)]
    works = dist.batch_isend_irecv(ops)
    for w in works:
        w.wait()
    return len(works), recv.tolist()


@pytest.mark.parametrize("size", [2, 3])
def test_batch_isend_irecv_is_one_coalesced_work_that_moves_every_message(size):
    out = run_ranks(batched_ring, size)
    for rank in range(size):
        works, recv = out[rank]
        assert works == 1  # torch took the coalescing path: one Work for the batch
        assert recv == [float((rank - 1) % size)] * 5


def one_wait_for_two_late_messages(rank, size):
    dist.barrier()
    if rank == 1:
        for delay in (1.0, 1.5):  # the second comes 2.5 s after the barrier
            time.sleep(delay)
            dist.send(torch.full((3,), delay), 0)
        return None
    bufs = [torch.zeros(3), torch.zeros(3)]
    works = dist.batch_isend_irecv([dist.P2POp(dist.irecv, b, 1) for b in bufs])
    raised = None
    try:
        works[0].wait(timeout=datetime.timedelta(seconds=2))
    except Exception as e:
        raised = str(e)
    second_when_it_gave_up = bufs[1].tolist()
    works[0].wait()  # the batch goes on, and completes
    return raised, second_when_it_gave_up, [b.tolist() for b in bufs]


def test_a_timeout_given_to_wait_bounds_the_whole_batch_not_each_operation():
    # 2 s for both: the first message (at 1 s) leaves 1 s, and the second
    # (at 2.5 s) misses it. Counted per operation, the wait would have
    # given the second 2 s more and returned.
    raised, second_when_it_gave_up, bufs = run_ranks(one_wait_for_two_late_messages, 2)[0]
    assert raised is not None and "timed out" in raised, raised
    assert "what was left of a wait of 2000 ms for 2 operations, 1 of them done" in raised, raised
    assert second_when_it_gave_up == [0.0] * 3
    assert bufs == [[1.0] * 3, [1.5] * 3]


def coalesced_collectives(rank, size):
    cpu = torch.device("cpu")
    sums = [torch.full((n,), float(rank + 1)) for n in (1, 7, 1000)]
    with _coalescing_manager(device=cpu, async_ops=True) as cm:
        for t in sums:
            dist.all_reduce(t)
    cm.wait()
    gathered = [torch.zeros(2 * size) for _ in range(2)]
    with _coalescing_manager(device=cpu, async_ops=True) as cm:
        for k, out in enumerate(gathered):
            dist.all_gather_into_tensor(out, torch.tensor([rank, 10.0 * k]))
    cm.wait()
    scattered = [torch.zeros(3) for _ in range(2)]
    with _coalescing_manager(device=cpu):  # blocking
        for k, out in enumerate(scattered):
            dist.reduce_scatter_tensor(out, torch.arange(3.0 * size) + k)
    return [t.tolist() for t in sums], [g.tolist() for g in gathered], [s.tolist() for s in scattered]


def test_coalesced_all_reduce_all_gather_and_reduce_scatter_give_every_value():
    size = 2
    out = run_ranks(coalesced_collectives, size)
    total = float(sum(r + 1 for r in range(size)))
    for rank in range(size):
        sums, gathered, scattered = out[rank]
        assert sums == [[total] * n for n in (1, 7, 1000)]
        assert gathered == [[v for q in range(size) for v in (float(q), 10.0 * k)] for k in range(2)]
        assert scattered == [[size * (3.0 * rank + i + k) for i in range(3)] for k in range(2)]


def monitored_barriers(rank, size):
    cohort_torch.monitored_barrier(timeout=datetime.timedelta(seconds=10))
    cohort_torch.monitored_barrier(timeout=10)
    # Now the last rank stays away: rank 0 names it.
    if rank == size - 1:
        time.sleep(4)
        return None
    try:
        cohort_torch.monitored_barrier(timeout=datetime.timedelta(seconds=2), wait_all_ranks=True)
        return "passed"
    except RuntimeError as e:
        return str(e)


def test_monitored_barrier_passes_and_names_the_rank_that_stayed_away():
    size = 3
    out = run_ranks(monitored_barriers, size)
    assert out[size - 1] is None
    message = out[0]
    assert message != "passed" and f"Rank {size - 1} failed to pass monitoredBarrier in 2000 ms" in message, message
    assert "successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0" \
        in out[1], out[1]


def sparse_all_reduces(rank, size):
    i = torch.tensor([[0, rank, 3], [1, 2, rank]])
    v = torch.tensor([1.0, 2.0 + rank, 3.0])
    t = torch.sparse_coo_tensor(i, v, (4, 4))
    dense = t.to_dense()
    dist.all_reduce(t)
    dist.all_reduce(dense)
    errors = []
    for bad in (lambda: dist.all_reduce(torch.sparse_coo_tensor(i, v, (4, 4)), op=dist.ReduceOp.MAX),
                lambda: dist.all_reduce(torch.eye(3).to_sparse_csr())):
        try:
            bad()
            errors.append(None)
        except RuntimeError as e:
            errors.append(str(e))
    after = torch.ones(2)
    dist.all_reduce(after)  # the group goes on
    return t.is_sparse, t.to_dense().tolist(), dense.tolist(), errors, after.tolist()


def test_sparse_all_reduce_sums_as_dense_and_names_what_it_cannot_reduce():
    size = 3
    out = run_ranks(sparse_all_reduces, size)
    for rank in range(size):
        is_sparse, summed, dense, (max_error, csr_error), after = out[rank]
        assert is_sparse and summed == dense, (summed, dense)
        assert max_error is not None and "sparse" in max_error and "SUM only" in max_error and "MAX" in max_error
        assert csr_error is not None and "SparseCsr" in csr_error, csr_error
        assert after == [float(size)] * 2


def symmetric_all_reduce(rank, size):
    small = cohort_torch.empty_symmetric((10, 3))
    large = cohort_torch.empty_symmetric(1 << 20, dtype=torch.float64)
    zero_filled = bool((small == 0).all()) and bool((large == 0).all())
    small.fill_(rank + 1.0)
    large.copy_(torch.arange(1 << 20, dtype=torch.float64) * (rank + 1))
    dist.all_reduce(small)
    dist.all_reduce(large[1:])  # a view inside the block
    # The block is a shared-memory mapping: find it in this process's maps.
    address, mapping = large.data_ptr(), None
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)  # range, perms, offset, dev, inode, path (maybe "(deleted)")
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi and len(fields) == 6:
                mapping = fields[5].strip()
    return (zero_filled, tuple(small.shape), small.unique().tolist(), large[:3].tolist(),
            large[-1].item(), mapping)


def test_empty_symmetric_is_a_zeroed_shared_tensor_that_collectives_reduce():
    size = 2
    out = run_ranks(symmetric_all_reduce, size)
    factor = sum(r + 1 for r in range(size))
    for rank in range(size):
        zero_filled, shape, small, head, last, mapping = out[rank]
        assert zero_filled and shape == (10, 3)
        assert small == [float(factor)]
        assert head == [0.0, 1.0 * factor, 2.0 * factor]  # element 0 lies outside the view: its own 0
        assert last == float(((1 << 20) - 1) * factor)
        assert mapping is not None and mapping.startswith("/dev/shm/"), mapping


def empty_symmetric_on_gloo(rank, size):
    try:
        cohort_torch.empty_symmetric(4)
    except ValueError as e:
        return str(e)


def test_empty_symmetric_on_a_gloo_group_says_it_needs_cohort():
    # One rank: the refusal needs no peer, and a gloo group of one makes no
    # connection (a 2-rank one's connection set-up inside torch's Gloo once
    # failed here with "Connection closed by peer", before cohort was asked).
    out = run_ranks(empty_symmetric_on_gloo, 1, backend="gloo")
    assert "'cohort'" in out[0] and "gloo" in out[0], out[0]


def mismatched_collectives(rank, size):
    try:
        if rank == 0:
            dist.all_reduce(torch.ones(4))
        else:
            dist.broadcast(torch.ones(4), src=0)
        return None
    except RuntimeError as e:
        return f"{type(e).__name__}: {e}"


def test_torch_distributed_debug_detail_turns_on_the_desync_check():
    out = run_ranks(mismatched_collectives, 2, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
    for rank in range(2):
        assert out[rank] is not None, f"rank {rank} returned from a mismatched collective"
        # A desync is torch's DistBackendError, as a timeout is.
        assert out[rank].startswith("DistBackendError: "), out[rank]
        assert "all_reduce" in out[rank] and "broadcast" in out[rank], out[rank]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def straggling_all_reduces(rank, size):
    # Rank 2 sleeps before each all_reduce; then every rank waits until its
    # copy of the group's summary has counted 40 of them (the group's rank
    # 0 joins the ranks' times every 0.2 s here).
    for _ in range(60):
        if rank == 2:
            time.sleep(0.02)
        dist.all_reduce(torch.ones(4))
    deadline = time.monotonic() + 20
    report = cohort_torch.stragglers()
    while (report["summary"] is None or report["summary"]["collectives"] < 40) and time.monotonic() < deadline:
        time.sleep(0.1)
        report = cohort_torch.stragglers()
    dist.barrier()
    return report


def test_stragglers_names_the_rank_the_others_waited_for():
    out = run_ranks(straggling_all_reduces, 4, env={"COHORT_STRAGGLER_INTERVAL_S": "0.2"})
    for rank in range(4):
        report = out[rank]
        assert isinstance(report, dict), report
        assert report["rank"] == rank and report["collectives"] >= 40, report  # as of its last tick
        summary = report["summary"]
        assert summary is not None and summary["collectives"] >= 40, report
        assert summary["straggler"] == 2, summary
        first = summary["ranks"][0]
        assert first["rank"] == 2 and first["host"], summary
        assert 0.015 < first["lateness_p50_s"] < 0.025, summary


def test_stragglers_on_a_gloo_group_says_it_needs_cohort():
    out = run_ranks(stragglers_on_gloo, 2, backend="gloo")
    assert "'cohort'" in out[0] and "stragglers" in out[0], out[0]


def stragglers_on_gloo(rank, size):
    try:
        cohort_torch.stragglers()
    except ValueError as e:
        return str(e)


def watched_by_cohort_top(rank, size):
    # Rank 0 starts `python -m cohort_torch.top --once` against the job's
    # own store (torch's TCPStore) and reads its screen at the end.
    import os
    import subprocess

    top = None
    if rank == 0:
        address = f"127.0.0.1:{os.environ['MASTER_PORT']}"
        top = subprocess.Popen(
            [sys.executable, "-m", "cohort_torch.top", "--once", "--timeout", "30", address],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    for _ in range(150):
        if rank == 1:
            time.sleep(0.02)
        dist.all_reduce(torch.ones(4))
    out = None
    if top is not None:
        out = (top.wait(timeout=60), top.stdout.read())
    dist.barrier()
    return out


def test_cohort_torch_top_names_the_straggler_through_torchs_store():
    out = run_ranks(watched_by_cohort_top, 3, env={"COHORT_STRAGGLER_INTERVAL_S": "0.3"})
    code, screen = out[0]
    assert code == 0, screen
    assert "straggler: rank 1 on " in screen, screen
    assert "all_reduce" in screen, screen


def test_cohort_torch_top_says_when_no_job_answers():
    import subprocess

    from ranks import free_port

    done = subprocess.run(
        [sys.executable, "-m", "cohort_torch.top", "--once", "--timeout", "1", f"127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done
    assert "no store answers at 127.0.0.1:" in done.stderr, done.stderr
