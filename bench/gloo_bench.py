"""gloo_bench: torch's ProcessGroupGloo (the anchor cohort's TCP path is
measured against), timed as cohort-bench times cohort and printed in the
same columns (nccl-tests': size count type redop root time algbw busbw).

    gloo_bench.py all_reduce [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] --spawn N

Python, not C++: torch's pip package ships ProcessGroupGloo.hpp but not the
gloo headers it includes, so a C++ program cannot be built against it. Each
call goes through torch.distributed.all_reduce, as a torch user's does; that
adds the Python call and torch's dispatch (a few microseconds) to gloo's
time, which matters only at the smallest sizes (docs/performance.md).
Each rank is a process; ranks meet through a FileStore. float32, SUM.
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


def run_rank(rank, args, path):
    # One thread per rank, as cohort-bench's ranks have.
    torch.set_num_threads(1)
    store = dist.FileStore(path, args.spawn)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=args.spawn)
    n = args.spawn
    if rank == 0:
        print(f"# gloo_bench all_reduce (torch {torch.__version__}), {n} ranks, "
              f"{args.iters} iterations after {args.warmup} warm-up")
        print(f"{'size':>12} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} {'time(us)':>10} "
              f"{'algbw(GB/s)':>10} {'busbw(GB/s)':>10} {'#wrong':>7}")
    busbw_sum, count_sizes = 0.0, 0
    for size in sizes(args.b, args.e, args.f):
        count = size // 4
        tensor = torch.full((count,), float(rank % 4), dtype=torch.float32)
        for _ in range(args.warmup):
            dist.all_reduce(tensor)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(tensor)
        us = (time.perf_counter() - start) * 1e6 / args.iters
        # The slowest rank's time, as cohort-bench reports.
        slowest = torch.tensor([us], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        us = slowest.item()
        algbw = count * 4 / us / 1e3
        busbw = algbw * 2.0 * (n - 1) / n
        busbw_sum += busbw
        count_sizes += 1
        if rank == 0:
            print(f"{count * 4:>12} {count:>12} {'float32':>8} {'SUM':>6} {-1:>5} {us:>10.3f} "
                  f"{algbw:>10.3f} {busbw:>10.3f} {'-':>7}", flush=True)
    if rank == 0:
        print(f"# Avg bus bandwidth    : {busbw_sum / count_sizes if count_sizes else 0.0:.3f} GB/s")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(prog="gloo_bench", description=__doc__.splitlines()[0])
    parser.add_argument("collective", choices=["all_reduce"], help="gloo_bench measures all_reduce only")
    parser.add_argument("-b", type=parse_size, default=8, help="smallest size in bytes")
    parser.add_argument("-e", type=parse_size, default=64 << 20, help="largest size in bytes")
    parser.add_argument("-f", type=float, default=2.0, help="factor between sizes")
    parser.add_argument("-n", dest="iters", type=int, default=20, help="timed iterations per size")
    parser.add_argument("-w", dest="warmup", type=int, default=5, help="warm-up iterations per size")
    parser.add_argument("--spawn", type=int, default=2, help="ranks, one process each")
    args = parser.parse_args()
    if args.spawn < 1 or args.f <= 1 or args.iters < 1 or args.warmup < 0:
        parser.error("--spawn and -n must be at least 1, -f above 1, -w at least 0")
    fd, path = tempfile.mkstemp(prefix="gloo-bench-")
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
