"""Prints torch 2.13's interleaved 1F1B order for each shape given.

Arguments: shapes as RANKS:LOCAL_STAGES:MICROBATCHES. For each shape and
rank it prints one line, "P v m rank: F0s0 F1s0 B0s1 ...", each action a
forward (F) or backward (B) of a microbatch on the rank's local stage
(torch's stage index s * P + rank printed as its local index s), with
torch's idle slots (None) left out. tests/torch/pipeline_order_test.cc
compares cohort's ScheduleInterleaved1F1B::rank_order with these lines.
"""
import sys
from types import SimpleNamespace

from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B, _ComputationType


def torch_order(ranks, local_stages, microbatches, rank):
    rounds = max(1, microbatches // ranks)
    schedule = SimpleNamespace(pp_group_size=ranks, n_local_stages=local_stages, _n_microbatches=microbatches,
                               number_of_rounds=rounds, microbatches_per_round=microbatches // rounds)
    actions = ScheduleInterleaved1F1B._calculate_single_rank_operations(schedule, rank)
    words = []
    for a in actions:
        if a is None:
            continue
        kind = "F" if a.computation_type == _ComputationType.FORWARD else "B"
        words.append(f"{kind}{a.microbatch_index}s{a.stage_index // ranks}")
    return " ".join(words)


for shape in sys.argv[1:]:
    ranks, local_stages, microbatches = (int(x) for x in shape.split(":"))
    for rank in range(ranks):
        print(f"{ranks} {local_stages} {microbatches} {rank}: {torch_order(ranks, local_stages, microbatches, rank)}")
