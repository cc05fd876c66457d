#!/usr/bin/env bash
# compare_fsdp.sh: fully sharded data parallel step time on one host, the
# same MLP (784-2048-2048-10, each Linear a unit, the root last, SGD with
# momentum, batch 64 per rank, one thread per rank) three ways, each
# launched by cohortrun, alternating, REPS times:
#  - cohort-cpp: cohort's fully_shard for libtorch (build/bench/fsdp_bench);
#  - torch over gloo: torch 2.13's fully_shard over gloo
#    (bench/python/fsdp_step.py), the anchor;
#  - torch over cohort: the same script over cohort's torch backend.
# Prints a markdown table of medians and the ratios to torch over gloo.
#
#   bench/compare_fsdp.sh [REPS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1
run_one() {
  local label="$1" nproc="$2"
  shift 2
  build/tools/cohortrun --standalone --nproc-per-node "$nproc" "$@" >"$out/run" 2>&1 || true
  if ! grep -oE "fsdp_bench .*" "$out/run" | sed "s/^/$label /" >>"$out/results"; then
    echo "compare_fsdp: '$*' at $nproc ranks gave no result; its last lines:" >&2
    tail -5 "$out/run" >&2
  fi
}
for ((rep = 0; rep < REPS; rep++)); do
  for p in 2 4; do
    run_one cpp "$p" build/bench/fsdp_bench --batch 64
    for backend in gloo cohort; do
      run_one torch "$p" bench/python/fsdp_step.py --backend "$backend" --batch 64
    done
  done
done
"${COHORT_PYTHON:-python3}" - "$out/results" "$REPS" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"\w+ fsdp_bench ([\w-]+) world=(\d+) batch=(\d+) step_ms=([\d.]+)", line)
    if m:
        runs.setdefault((int(m[2]), m[1]), []).append(float(m[4]))
print(f"# fully_shard step time, MLP 784-2048-2048-10, batch 64 per rank, median of {sys.argv[2]} runs\n")
print("| ranks | cohort-cpp (ms) | torch over gloo (ms) | torch over cohort (ms) | cohort-cpp / gloo | torch over cohort / gloo |")
print("|---|---|---|---|---|---|")
for p in sorted({k[0] for k in runs}):
    c, g, t = (statistics.median(runs[(p, k)]) if (p, k) in runs else None for k in ("cohort-cpp", "gloo", "cohort"))
    fmt = lambda v: f"{v:.2f}" if v is not None else "-"
    ratio = lambda a, b: f"{a / b:.2f}" if a is not None and b else "-"
    print(f"| {p} | {fmt(c)} | {fmt(g)} | {fmt(t)} | {ratio(c, g)} | {ratio(t, g)} |")
PY
