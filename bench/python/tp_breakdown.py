"""Where a token's time goes in tensor-parallel generation (issue 40):
one process and TP over cohort, each run once under torch's profiler, the
same model and prompt as bench/python/tp_generate.py.

    python3 bench/python/tp_breakdown.py [--tp 2] [--tokens 32]

Prints, per generated token on rank 0: the matrix products (aten::mm and
friends, the part TP divides), the collectives as torch sees them
(c10d::allreduce_ and the functional collectives with their waits:
cohort's own work plus the wait for the other rank), DTensor's Python
(Redistribute, from_local: torch's, not the backend's), and the rest of the
forward pass (norms, rotary embedding, attention glue, sampling: Python and
small ops that every rank runs whole). The last line is Amdahl's bound that
follows: what TP could reach with collectives that cost nothing.
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tp_common import launch, load_llama, save_llama  # noqa: E402

MATMUL = ("aten::mm", "aten::addmm", "aten::bmm")
COLLECTIVE = ("c10d::", "_c10d_functional::")
DTENSOR = ("Redistribute", "_FromTorchTensor", "_ToTorchTensor", "PythonSubclass")


def worker(backend, model_dir, tokens, out):
    torch, model, prompt, sync = load_llama(backend, model_dir)
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=4, do_sample=False)
        sync()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=tokens,
                           min_new_tokens=tokens, do_sample=False)
            wall = time.perf_counter() - start
        sync()
    parts = {"matmul": 0.0, "collective": 0.0, "dtensor": 0.0}
    def inside_collective(e):
        e = e.cpu_parent
        while e is not None:
            if e.name.startswith(COLLECTIVE):
                return True
            e = e.cpu_parent
        return False

    for e in prof.events():
        if e.name in MATMUL:
            parts["matmul"] += e.self_cpu_time_total
        elif e.name.startswith(COLLECTIVE) and not inside_collective(e):
            # The outermost call only (a functional collective calls c10d's
            # op), its wait for the other rank included.
            parts["collective"] += e.cpu_time_total
        elif e.name in DTENSOR:
            parts["dtensor"] += e.self_cpu_time_total
    rank = torch.distributed.get_rank() if backend != "none" else 0
    if rank == 0:
        per_token = {k: v / 1000 / tokens for k, v in parts.items()}
        per_token["total"] = 1000 * wall / tokens
        per_token["other"] = per_token["total"] - per_token["matmul"] - per_token["collective"] - per_token["dtensor"]
        with open(out, "w") as f:
            json.dump(per_token, f)
    if backend != "none":
        torch.distributed.destroy_process_group()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--tokens", type=int, default=32)
    args = p.parse_args()
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = os.path.join(tmp, "llama")
        save_llama(model_dir)
        for setup in ("none", "cohort"):
            res[setup] = launch(__file__, setup, args.tp, [model_dir, args.tokens], os.path.join(tmp, f"{setup}.json"))
    one, tp = res["none"], res["cohort"]
    print(f"# per generated token on rank 0, ms (profiled, {args.tokens} tokens; the profiler adds its own cost)\n")
    print(f"| part | one process | TP={args.tp} over cohort |")
    print("|---|---|---|")
    for k, name in (("matmul", "matrix products (TP divides these)"),
                    ("collective", "collectives as torch sees them (call + wait)"),
                    ("dtensor", "DTensor's Python (redistribute, from_local)"),
                    ("other", "the rest of the forward pass and sampling"), ("total", "total")):
        print(f"| {name} | {one[k]:.2f} | {tp[k]:.2f} |")
    ideal = one["matmul"] / args.tp + one["other"]
    shared = tp["matmul"] + one["other"]
    print(f"\nAmdahl's bound with free collectives and no DTensor: {one['total'] / ideal:.2f}x one process "
          f"(the matrix products divided by {args.tp}, the rest run whole on every rank), "
          f"{one['total'] / shared:.2f}x with the products as fast as they run under TP (the ranks share the "
          f"memory bandwidth); measured here {one['total'] / tp['total']:.2f}x.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
