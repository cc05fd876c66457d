"""A job with a straggler, for docs/stragglers.md: every rank runs a small
DDP-like step (an all_reduce of a gradient), and one rank sleeps before
each one, as a slow data loader would. Run it with a launcher:

    COHORT_TRACE_DIR=/tmp/straggler-dumps build/tools/cohortrun --standalone \\
        --nproc-per-node 4 examples/python/straggler.py --steps 300 --slow-rank 2

and watch it with `build/tools/cohort-top 127.0.0.1:29500` meanwhile (the
job's store: MASTER_ADDR:MASTER_PORT). At the end each rank writes its
flight-recorder dump (with COHORT_TRACE_DIR), which
`build/tools/cohort-trace --stragglers /tmp/straggler-dumps` reads, and
rank 0 prints what cohort_torch.stragglers() says.
"""

import argparse
import os
import signal
import time

import torch
import torch.distributed as dist

import cohort_torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--slow-rank", type=int, default=2)
    parser.add_argument("--sleep-ms", type=float, default=20)
    args = parser.parse_args()
    dist.init_process_group("cohort")
    rank = dist.get_rank()
    grad = torch.ones(1024)
    for _ in range(args.steps):
        if rank == args.slow_rank:
            time.sleep(args.sleep_ms / 1000)
        dist.all_reduce(grad)
        grad.fill_(1)
    time.sleep(1.5)  # a last join of the ranks' times (every COHORT_STRAGGLER_INTERVAL_S)
    if os.environ.get("COHORT_TRACE_DIR"):
        os.kill(os.getpid(), signal.SIGUSR1)  # the flight recorder's dump, as for a hung job
        time.sleep(0.5)
    if rank == 0:
        summary = cohort_torch.stragglers()["summary"]
        if summary:
            print(f"straggler: rank {summary['straggler']}; collectives counted: {summary['collectives']}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
