#!/usr/bin/env bash
# compare_ddp.sh: cohort's DistributedDataParallel (bench/ddp_bench, under
# cohortrun) against torch's own DDP over Gloo (bench/ddp_bench_torch.py,
# under torch.distributed.run), side by side: the MLP 784-2048-2048-10 and
# the tutorial's CNN, 2 ranks, batch 16 and 64 per rank, one thread per
# rank; the MLP also with gradient_as_bucket_view on both sides. Each measures the step time with synchronisation and under no_sync;
# their difference is DDP's overhead. Medians of REPS runs (each itself a
# median of rounds); prints a markdown table. Both zero the gradients as
# torch 2.x's zero_grad does by default, by dropping them (set_to_none):
# `--zero-grad in-place` after REPS compares the other way (both sides).
#
#   bench/compare_ddp.sh [REPS=3] [EXTRA_FLAGS...]   (flags both take: --zero-grad, --steps)
#
# Needs build/bench/ddp_bench and build/tools/cohortrun (scripts/test builds
# them) and torch 2.13 in COHORT_PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-3}"
shift || true
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1
# keep_result adds the result line of the run just made (in $out/run) to
# $out/results, or says on stderr that the run gave none, with its last lines:
# one failed run must not end the comparison.
keep_result() {  # model implementation
  if ! grep -o "ddp_bench $2.*" "$out/run" | sed "s/^/$1 /" >>"$out/results"; then
    echo "compare_ddp: a $2 run of $1 gave no result; its last lines:" >&2
    tail -5 "$out/run" >&2
  fi
}
# model, batch per rank, extra flags for both implementations
configs=("mlp 16" "mlp 64" "cnn 16" "cnn 64" "mlp 16 --gradient-as-bucket-view" "mlp 64 --gradient-as-bucket-view")
for config in "${configs[@]}"; do
  read -r model batch flags <<<"$config"
  for ((i = 0; i < REPS; i++)); do
    # shellcheck disable=SC2086
    build/tools/cohortrun --standalone --nproc-per-node 2 build/bench/ddp_bench --model "$model" --batch "$batch" \
      $flags "$@" >"$out/run" 2>&1 || true
    keep_result "$model" cohort
    # shellcheck disable=SC2086
    "${COHORT_PYTHON:-python3}" -m torch.distributed.run --standalone --nproc_per_node 2 bench/ddp_bench_torch.py \
      --model "$model" --batch "$batch" $flags "$@" >"$out/run" 2>&1 || true
    keep_result "$model" torch
  done
done
/usr/bin/python3 - "$out/results" "$REPS" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) ddp_bench (\w+)(\+view)? world=(\d+) batch=(\d+) sync_ms=([\d.]+) no_sync_ms=([\d.]+)", line)
    if m:
        model, impl, view, _, batch, sync, local = m.groups()
        rows.setdefault((model + (" (bucket view)" if view else ""), int(batch), impl), []).append(
            (float(sync), float(local)))
def med(v, i):
    return statistics.median(x[i] for x in v)
print(f"DDP step time, 2 ranks on one host, one thread each, median of {sys.argv[2]} runs\n")
print("| model | batch/rank | cohort sync (ms) | cohort no_sync (ms) | cohort overhead (ms) "
      "| torch sync (ms) | torch no_sync (ms) | torch overhead (ms) | overhead torch / cohort |")
print("|---|---|---|---|---|---|---|---|---|")
for model in ("mlp", "cnn", "mlp (bucket view)"):
    for batch in (16, 64):
        c, t = rows.get((model, batch, "cohort")), rows.get((model, batch, "torch"))
        if not c or not t:
            continue
        co, to = med(c, 0) - med(c, 1), med(t, 0) - med(t, 1)
        ratio = f"{to / co:.1f}" if co > 0.05 else "n/a (cohort overhead below noise)"
        print(f"| {model} | {batch} | {med(c,0):.2f} | {med(c,1):.2f} | {co:.2f} | {med(t,0):.2f} | {med(t,1):.2f} "
              f"| {to:.2f} | {ratio} |")
PY
