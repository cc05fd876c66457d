"""torch_collectives: torch.distributed's collectives from Python over a
backend, "gloo" (the anchor cohort is measured against) or "cohort"
(import cohort_torch), timed as cohort-bench times cohort and printed in
the same columns (nccl-tests': size count type redop root time algbw busbw).

    torch_collectives.py COLLECTIVE [--backend gloo|cohort] [-b MIN] [-e MAX] [-f FACTOR]
                         [-n ITERS] [-w WARMUP] [--functional] --spawn N

COLLECTIVE: all_reduce, all_gather (all_gather_into_tensor), reduce_scatter
(reduce_scatter_tensor) or broadcast; the size is each rank's output for
all_reduce and broadcast, the whole gathered tensor for all_gather and the
whole input for reduce_scatter, as cohort-bench counts. build/bench/
gloo_bench runs it with --backend gloo (torch's pip package ships no gloo
headers for a C++ twin). Each call goes through torch.distributed, as a
torch user's does: the Python call and torch's dispatch (a few
microseconds) count too. Each rank is a process; ranks meet through a
FileStore. float32, SUM, root 0. --functional calls torch's functional
collectives instead (torch.ops._c10d_functional, as DTensor and tensor
parallelism do): each call is queued, returns a tensor, and
`wait_tensor` waits for it.
"""

import argparse
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    """Parses 4, 64K, 16M, 1G (binary multiples), as cohort-bench does."""
    text = text.strip().upper().removesuffix("B")
    suffix = text[-1] if text and text[-1] in "KMG" else ""
    try:
        return int(float(text[: len(text) - len(suffix)]) * SIZE_SUFFIXES[suffix])
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (4, 64K, 16M, 1G)")


def sizes(min_bytes, max_bytes, factor):
    size = max(min_bytes, 4)
    while size <= max_bytes:
        yield size
        size = max(size + 4, round(size * factor))


# BUS_FACTOR[collective](n): nccl-tests' bus bandwidth factor.
BUS_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def make_functional_call(collective, count, rank, n):
    """The same calls through torch's functional collectives: queued, then
    waited for with wait_tensor."""
    fc = torch.ops._c10d_functional
    group = dist.group.WORLD.group_name
    piece = max(count // n, 1)
    if collective == "all_reduce":
        t = torch.full((count,), float(rank % 4))
        return lambda: fc.wait_tensor(fc.all_reduce(t, "sum", group))
    if collective == "broadcast":
        t = torch.full((count,), float(rank % 4))
        return lambda: fc.wait_tensor(fc.broadcast(t, 0, group))
    if collective == "all_gather":
        inp = torch.full((piece,), float(rank % 4))
        return lambda: fc.wait_tensor(fc.all_gather_into_tensor(inp, n, group))
    inp = torch.full((piece * n,), float(rank % 4))
    return lambda: fc.wait_tensor(fc.reduce_scatter_tensor(inp, "sum", n, group))


def make_call(collective, count, rank, n):
    """The timed call for `count` float32 elements (the size counted)."""
    if collective == "all_reduce":
        t = torch.full((count,), float(rank % 4))
        return lambda: dist.all_reduce(t)
    if collective == "broadcast":
        t = torch.full((count,), float(rank % 4))
        return lambda: dist.broadcast(t, src=0)
    piece = max(count // n, 1)
    if collective == "all_gather":
        out, inp = torch.empty(piece * n), torch.full((piece,), float(rank % 4))
        return lambda: dist.all_gather_into_tensor(out, inp)
    out, inp = torch.empty(piece), torch.full((piece * n,), float(rank % 4))
    return lambda: dist.reduce_scatter_tensor(out, inp)


def run_rank(rank, args, path):
    # One thread per rank, as cohort-bench's ranks have.
    torch.set_num_threads(1)
    if args.backend == "cohort":
        import cohort_torch  # noqa: F401  (registers the backend)
    store = dist.FileStore(path, args.spawn)
    dist.init_process_group(args.backend, store=store, rank=rank, world_size=args.spawn)
    n = args.spawn
    if rank == 0:
        how = " (functional)" if args.functional else ""
        print(f"# torch_collectives {args.collective}{how} over {args.backend} (torch {torch.__version__}), {n} ranks, "
              f"{args.iters} iterations after {args.warmup} warm-up")
        print(f"{'size':>12} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} {'time(us)':>10} "
              f"{'algbw(GB/s)':>10} {'busbw(GB/s)':>10} {'#wrong':>7}")
    busbw_sum, count_sizes = 0.0, 0
    for size in sizes(args.b, args.e, args.f):
        count = size // 4
        call = (make_functional_call if args.functional else make_call)(args.collective, count, rank, n)
        for _ in range(args.warmup):
            call()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            call()
        us = (time.perf_counter() - start) * 1e6 / args.iters
        # The slowest rank's time, as cohort-bench reports.
        slowest = torch.tensor([us], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        us = slowest.item()
        algbw = count * 4 / us / 1e3
        busbw = algbw * BUS_FACTOR[args.collective](n)
        busbw_sum += busbw
        count_sizes += 1
        if rank == 0:
            root = 0 if args.collective == "broadcast" else -1
            print(f"{count * 4:>12} {count:>12} {'float32':>8} {'SUM':>6} {root:>5} {us:>10.3f} "
                  f"{algbw:>10.3f} {busbw:>10.3f} {'-':>7}", flush=True)
    if rank == 0:
        print(f"# Avg bus bandwidth    : {busbw_sum / count_sizes if count_sizes else 0.0:.3f} GB/s")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(prog="torch_collectives", description=__doc__.splitlines()[0])
    parser.add_argument("collective", choices=sorted(BUS_FACTOR))
    parser.add_argument("--backend", choices=["gloo", "cohort"], default="gloo")
    parser.add_argument("-b", type=parse_size, default=8, help="smallest size in bytes")
    parser.add_argument("-e", type=parse_size, default=64 << 20, help="largest size in bytes")
    parser.add_argument("-f", type=float, default=2.0, help="factor between sizes")
    parser.add_argument("-n", dest="iters", type=int, default=20, help="timed iterations per size")
    parser.add_argument("-w", dest="warmup", type=int, default=5, help="warm-up iterations per size")
    parser.add_argument("--spawn", type=int, default=2, help="ranks, one process each")
    parser.add_argument("--functional", action="store_true",
                        help="through torch's functional collectives and wait_tensor")
    args = parser.parse_args()
    if args.spawn < 1 or args.f <= 1 or args.iters < 1 or args.warmup < 0:
        parser.error("--spawn and -n must be at least 1, -f above 1, -w at least 0")
    fd, path = tempfile.mkstemp(prefix="torch-collectives-")
    os.close(fd)
    os.unlink(path)
    try:
        mp.start_processes(run_rank, args=(args, path), nprocs=args.spawn, start_method="fork")
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
