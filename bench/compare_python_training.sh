#!/usr/bin/env bash
# compare_python_training.sh: torch's own training wrappers from Python over
# "cohort" (import cohort_torch) and over "gloo", side by side, each launched
# by cohortrun on this host with one thread per rank, alternating, REPS
# times; prints markdown tables of medians.
#  - DistributedDataParallel (bench/ddp_bench_torch.py): the MLP
#    784-2048-2048-10 and the tutorial's CNN, batch 16 and 64 per rank,
#    2 ranks, also the MLP with gradient_as_bucket_view: step time with
#    synchronisation, under no_sync, and their difference (DDP's overhead).
#  - fully_shard (bench/python/fsdp_step.py): the MLP, batch 64 per rank,
#    2 and 4 ranks: step time.
#
#   bench/compare_python_training.sh [REPS=3]
#
# Needs build/tools/cohortrun and build/python (scripts/test builds both
# when torch is found).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
source bench/lib/launch.sh
export OMP_NUM_THREADS=1
# run_one LABEL NPROC PROGRAM ARGS...: one launch; its result line, after
# LABEL, goes to $out/results, or its last lines to stderr (one failed run
# must not end the comparison). A launch that failed after rank 0 printed
# its result is said on stderr and its result kept: over gloo, torch 2.13's
# fully_shard job sometimes dies in shutdown ("terminate called without an
# active exception" on one rank) after its last step.
run_one() {
  local label="$1" nproc="$2"
  shift 2
  run_launched compare_python_training "(ddp|fsdp)_bench .*" "$label" "$nproc" "$@"
}
for ((rep = 0; rep < REPS; rep++)); do
  for config in "mlp 16" "mlp 64" "cnn 16" "cnn 64" "mlp 16 --gradient-as-bucket-view" \
    "mlp 64 --gradient-as-bucket-view"; do
    read -r model batch flags <<<"$config"
    for backend in cohort gloo; do
      # shellcheck disable=SC2086
      run_one "$model" 2 bench/ddp_bench_torch.py --backend "$backend" --model "$model" --batch "$batch" $flags
    done
  done
  for p in 2 4; do
    for backend in cohort gloo; do
      run_one mlp "$p" bench/python/fsdp_step.py --backend "$backend" --batch 64
    done
  done
done
"${COHORT_PYTHON:-python3}" - "$out/results" "$REPS" <<'PY'
import re, statistics, sys
ddp, fsdp = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) ddp_bench (\w+?)(\+view)? world=\d+ batch=(\d+) sync_ms=([\d.]+) no_sync_ms=([\d.]+)", line)
    if m:
        model, impl, view, batch, sync, local = m.groups()
        backend = "cohort" if impl == "torch_over_cohort" else "gloo"
        ddp.setdefault((model + (" (bucket view)" if view else ""), int(batch), backend), []).append(
            (float(sync), float(local)))
    m = re.match(r"\w+ fsdp_bench (\w+) world=(\d+) batch=(\d+) step_ms=([\d.]+)", line)
    if m:
        fsdp.setdefault((int(m[2]), m[1]), []).append(float(m[4]))
def med(v, i):
    return statistics.median(x[i] for x in v)
print(f"torch's DistributedDataParallel from Python, 2 ranks on one host, one thread each, median of {sys.argv[2]} runs\n")
print("| model | batch/rank | over cohort: sync (ms) | no_sync (ms) | overhead (ms) "
      "| over gloo: sync (ms) | no_sync (ms) | overhead (ms) | overhead cohort / gloo |")
print("|---|---|---|---|---|---|---|---|---|")
for model in ("mlp", "cnn", "mlp (bucket view)"):
    for batch in (16, 64):
        c, g = ddp.get((model, batch, "cohort")), ddp.get((model, batch, "gloo"))
        if not c or not g:
            continue
        co, go = med(c, 0) - med(c, 1), med(g, 0) - med(g, 1)
        print(f"| {model} | {batch} | {med(c,0):.2f} | {med(c,1):.2f} | {co:.2f} | {med(g,0):.2f} | {med(g,1):.2f} "
              f"| {go:.2f} | {co / go:.2f} |")
print(f"\ntorch's fully_shard (FSDP2) from Python, the MLP, batch 64 per rank, median of {sys.argv[2]} runs\n")
print("| ranks | over cohort: step (ms) | over gloo: step (ms) | cohort / gloo |")
print("|---|---|---|---|")
for p in sorted({k[0] for k in fsdp}):
    c, g = fsdp.get((p, "cohort")), fsdp.get((p, "gloo"))
    if c and g:
        print(f"| {p} | {statistics.median(c):.2f} | {statistics.median(g):.2f} | "
              f"{statistics.median(c) / statistics.median(g):.2f} |")
PY
