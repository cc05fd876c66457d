# pipeline_step.py: torch 2.13's torch.distributed.pipelining on the MLP
# stack of bench/pipeline_bench.cc (LAYERS Linear(WIDTH, WIDTH) + ReLU,
# cut evenly into one stage per rank, two per rank for "interleaved":
# stages r and r + P on rank r), batch BATCH in MICROBATCHES, SGD,
# over "gloo" or "cohort", one thread per rank. Run it under cohortrun or
# torch.distributed.run (env://). Prints from rank 0, as pipeline_bench:
#   pipeline_bench torch-<backend>-<schedule> stages=P microbatches=M step_ms=median samples_per_s=S
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="gloo", choices=["gloo", "cohort"])
    p.add_argument("--schedule", default="1f1b", choices=["gpipe", "1f1b", "interleaved"])
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.backend == "cohort":
        import cohort_torch  # noqa: F401  (registers the backend)
    dist.init_process_group(a.backend)
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

    world, rank = dist.get_world_size(), dist.get_rank()
    torch.manual_seed(0)
    layers = []
    for _ in range(a.layers):
        layers += [nn.Linear(a.width, a.width), nn.ReLU()]
    per_rank = 2 if a.schedule == "interleaved" else 1
    stages = per_rank * world
    cuts = [0] + [2 * a.layers * s // stages for s in range(1, stages)] + [2 * a.layers]
    parts = [nn.Sequential(*layers[cuts[s]:cuts[s + 1]]) for s in range(rank, stages, world)]
    held = [PipelineStage(part, s, stages, torch.device("cpu")) for part, s in zip(parts, range(rank, stages, world))]
    if a.schedule == "interleaved":
        schedule = ScheduleInterleaved1F1B(held, a.microbatches, loss_fn=nn.functional.mse_loss)
    else:
        kind = ScheduleGPipe if a.schedule == "gpipe" else Schedule1F1B
        schedule = kind(held[0], a.microbatches, loss_fn=nn.functional.mse_loss)
    opt = torch.optim.SGD([t for part in parts for t in part.parameters()], lr=0.01)
    x, y = torch.randn(a.batch, a.width), torch.randn(a.batch, a.width)
    times = []
    for step in range(-3, a.steps):
        opt.zero_grad()
        dist.barrier()
        start = time.perf_counter()
        if rank == 0:
            schedule.step(x)
        elif rank == world - 1:
            schedule.step(target=y, losses=[])
        else:
            schedule.step()
        elapsed = time.perf_counter() - start
        opt.step()
        if step >= 0:
            times.append(elapsed)
    mine = torch.tensor([statistics.median(times)], dtype=torch.float64)
    everyone = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(everyone, mine)
    if rank == 0:
        step = max(t.item() for t in everyone)
        print(f"pipeline_bench torch-{a.backend}-{a.schedule} stages={world} microbatches={a.microbatches} "
              f"step_ms={step * 1e3:.2f} samples_per_s={a.batch / step:.0f}", flush=True)
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


if __name__ == "__main__":
    main()
