#!/usr/bin/env bash
# compare_tp.sh: tensor parallel training step (build/bench/fsdp_bench
# --mode tp: the 5.8M-parameter MLP's first Linear cut column-wise and its
# second row-wise over 2 ranks, the same batch of 64 on both) against the
# whole model's step in one process (--mode single), alternating, REPS
# times. Prints a markdown table of medians and the speedup (issue 25's
# "step time of the TP MLP at 2 ranks against the single-process step").
#
#   bench/compare_tp.sh [REPS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
source bench/lib/launch.sh
export OMP_NUM_THREADS=1
for _ in $(seq "$REPS"); do
  run_launched compare_tp "fsdp_bench .*" "" 1 build/bench/fsdp_bench --mode single
  run_launched compare_tp "fsdp_bench .*" "" 2 build/bench/fsdp_bench --mode tp
done
python3 - "$out/results" "$REPS" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.search(r"fsdp_bench (\S+) world=(\d+) .*step_ms=([\d.]+) peak_mb=([\d.]+)", line)
    if m:
        rows.setdefault(m.group(1), []).append((float(m.group(3)), float(m.group(4))))
print(f"# tensor parallel MLP step: 2 ranks against one process, medians of {sys.argv[2]} runs\n")
print("| run | step (ms) | peak memory per rank (MiB) |")
print("|---|---|---|")
for name, label in (("single", "one process, whole model"), ("cohort-tp", "tensor parallel, 2 ranks")):
    if name in rows:
        print(f"| {label} | {statistics.median(r[0] for r in rows[name]):.2f} | "
              f"{statistics.median(r[1] for r in rows[name]):.1f} |")
if "single" in rows and "cohort-tp" in rows:
    s = statistics.median(r[0] for r in rows["single"]) / statistics.median(r[0] for r in rows["cohort-tp"])
    print(f"\nspeedup of 2-rank tensor parallelism over one process: {s:.2f}x")
PY
