"""Every dtype x ReduceOp cohort supports, from Python through torch's own
calls, and the four object collectives: real processes, values checked
against references computed here (the same contributions and rules as the
C++ matrix's tests/process_group/reference.h).

Run by ctest (python.matrix) with PYTHONPATH naming build/python."""

import sys

import pytest
import torch
import torch.distributed as dist

import cohort_torch  # noqa: F401  (registers the backend)
from ranks import run_ranks

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64, torch.bool]
FLOATING = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
COUNT = 7  # odd, so that no kernel runs on whole vectors only


def ops_for(dtype):
    ops = ["SUM", "PRODUCT", "MIN", "MAX"]
    return ops + (["AVG", "PREMUL_SUM"] if dtype in FLOATING else ["BAND", "BOR", "BXOR"])


def contribution(dtype, op, rank, i):
    """Small integers, so that sums and products are exact in every dtype."""
    if dtype == torch.bool:
        return (rank + i) % 2
    if op == "PRODUCT":
        return 1 + (rank + i) % 2
    if op in ("BAND", "BOR", "BXOR"):
        return (rank * 37 + i * 11) & 0x7F
    if op in ("MIN", "MAX"):
        return (rank * 7 + i * 3) % 23
    return (rank + i) % 4


def expected(dtype, op, size, i):
    values = [contribution(dtype, op, r, i) for r in range(size)]
    if dtype == torch.bool:
        if op in ("PRODUCT", "MIN", "BAND"):
            return float(all(values))
        if op == "BXOR":
            return float(sum(values) % 2)
        return float(any(values))
    if op == "SUM":
        return float(sum(values))
    if op == "AVG":
        return sum(values) / size
    if op == "PREMUL_SUM":
        return 0.5 * sum(values)
    if op == "PRODUCT":
        p = 1
        for v in values:
            p *= v
        return float(p)
    if op == "MIN":
        return float(min(values))
    if op == "MAX":
        return float(max(values))
    acc = values[0]
    for v in values[1:]:
        acc = acc & v if op == "BAND" else acc | v if op == "BOR" else acc ^ v
    return float(acc)


def torch_op(op):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(0.5)
    return getattr(dist.ReduceOp, op)


def all_reduce_matrix(rank, size):
    got = {}
    for dtype in DTYPES:
        for op in ops_for(dtype):
            t = torch.tensor([contribution(dtype, op, rank, i) for i in range(COUNT)]).to(dtype)
            dist.all_reduce(t, op=torch_op(op))
            got[(str(dtype), op)] = t.double().tolist()
    return got


def moves_matrix(rank, size):
    """The collectives that move data rather than reduce it, per dtype."""
    got = {}
    for dtype in DTYPES:
        mine = (torch.arange(COUNT) + 3 * rank).to(dtype)
        b = mine.clone()
        dist.broadcast(b, src=size - 1)
        gathered = torch.zeros(COUNT * size, dtype=dtype)
        dist.all_gather_into_tensor(gathered, mine)
        rs = torch.zeros(COUNT, dtype=dtype)
        dist.reduce_scatter_tensor(rs, torch.cat([mine] * size))
        a2a = torch.zeros(size, dtype=dtype)
        dist.all_to_all_single(a2a, (torch.arange(size) + 4 * rank).to(dtype))
        got[str(dtype)] = {
            "broadcast": b.double().tolist(),
            "all_gather_into_tensor": gathered.double().tolist(),
            "reduce_scatter_tensor": rs.double().tolist(),
            "all_to_all_single": a2a.double().tolist(),
        }
    return got


def close(dtype, got, want):
    if dtype in ("torch.float16", "torch.bfloat16"):
        return abs(got - want) <= 1e-2 * max(1.0, abs(want))
    if dtype in ("torch.float32", "torch.float64"):
        return abs(got - want) <= 1e-5 * max(1.0, abs(want))
    return got == want


def stored(dtype, value):
    """What `value` becomes once stored in dtype (rounding, wrapping)."""
    return torch.tensor([value], dtype=torch.float64).to(getattr(torch, dtype.split(".")[1])).double().item()


@pytest.mark.parametrize("size", [2, 3])
def test_all_reduce_of_every_dtype_and_op_equals_the_reference(size):
    out = run_ranks(all_reduce_matrix, size)
    checked = 0
    for rank in range(size):
        for (dtype, op), values in out[rank].items():
            for i, got in enumerate(values):
                want = stored(dtype, expected(getattr(torch, dtype.split(".")[1]), op, size, i))
                assert close(dtype, got, want), f"rank {rank} {dtype} {op} element {i}: {got} != {want}"
                checked += 1
    assert checked == size * COUNT * sum(len(ops_for(d)) for d in DTYPES)


def test_broadcast_gather_scatter_and_all_to_all_of_every_dtype():
    size = 3
    out = run_ranks(moves_matrix, size)
    for rank in range(size):
        for dtype, got in out[rank].items():
            def mine(r):
                return [stored(dtype, k + 3 * r) for k in range(COUNT)]
            assert got["broadcast"] == mine(size - 1), (rank, dtype)
            assert got["all_gather_into_tensor"] == [v for r in range(size) for v in mine(r)], (rank, dtype)
            if dtype == "torch.bool":
                want_rs = [float(any(mine(r)[k] for r in range(size))) for k in range(COUNT)]
            else:
                want_rs = [stored(dtype, sum(k + 3 * r for r in range(size))) for k in range(COUNT)]
            assert got["reduce_scatter_tensor"] == want_rs, (rank, dtype)
            assert got["all_to_all_single"] == [stored(dtype, rank + 4 * r) for r in range(size)], (rank, dtype)


def unsupported_pairs(rank, size):
    """A bitwise op on a float and AVG on bool: the error, on every rank."""
    messages = []
    for dtype, op in [(torch.float32, dist.ReduceOp.BAND), (torch.bool, dist.ReduceOp.AVG)]:
        try:
            dist.all_reduce(torch.ones(3, dtype=dtype), op=op)
            messages.append(None)
        except RuntimeError as e:
            messages.append(str(e))
    dist.barrier()  # the group still works
    t = torch.ones(2)
    dist.all_reduce(t)
    return messages, t.tolist()


def test_an_op_a_dtype_cannot_take_raises_naming_both_and_the_group_goes_on():
    out = run_ranks(unsupported_pairs, 2)
    for rank in range(2):
        (band, avg), after = out[rank]
        assert band is not None and "BAND" in band and "float32" in band, band
        assert avg is not None and "AVG" in avg and "bool" in avg, avg
        assert after == [2.0, 2.0]


def integer_averages(rank, size):
    got = {}
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
        signed = dtype != torch.uint8
        t = torch.tensor([1 + rank, 7 * rank, (-5 if signed else 5) - rank, 20], dtype=dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        got[str(dtype)] = t.tolist()
    return got


@pytest.mark.parametrize("size", [2, 3])
def test_avg_on_integers_is_the_sum_divided_by_the_size_truncated_as_nccl(size):
    out = run_ranks(integer_averages, size)
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
        signed = dtype != torch.uint8
        sums = [sum(1 + r for r in range(size)), sum(7 * r for r in range(size)),
                sum((-5 if signed else 5) - r for r in range(size)), 20 * size]
        # Truncation toward zero: -3.5 is -3, as NCCL's (and C's) integer division.
        want = [int(s / size) for s in sums]
        for rank in range(size):
            assert out[rank][str(dtype)] == want, (dtype, rank, out[rank][str(dtype)], want)


def object_collectives(rank, size):
    got = {}
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "payload": "x" * (100 * rank + 1)})
    got["all_gather_object"] = objs
    lst = [("root", list(range(7)), 3.5), {"k": b"bytes" * 50}] if rank == 1 else [None, None]
    dist.broadcast_object_list(lst, src=1)
    got["broadcast_object_list"] = lst
    gathered = [None] * size if rank == 0 else None
    dist.gather_object(["from", rank] * (rank + 1), gathered, dst=0)
    got["gather_object"] = gathered
    received = [None]
    dist.scatter_object_list(received, [{"to": q, "blob": "y" * (q * 300)} for q in range(size)] if rank == 0
                             else None, src=0)
    got["scatter_object_list"] = received[0]
    return got


@pytest.mark.parametrize("size", [2, 3])
def test_the_object_collectives_carry_objects_of_different_sizes_and_types(size):
    out = run_ranks(object_collectives, size)
    for rank in range(size):
        got = out[rank]
        assert got["all_gather_object"] == [{"rank": q, "payload": "x" * (100 * q + 1)} for q in range(size)]
        assert got["broadcast_object_list"] == [("root", list(range(7)), 3.5), {"k": b"bytes" * 50}]
        assert got["scatter_object_list"] == {"to": rank, "blob": "y" * (rank * 300)}
    assert out[0]["gather_object"] == [["from", q] * (q + 1) for q in range(size)]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
