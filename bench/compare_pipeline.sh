#!/usr/bin/env bash
# compare_pipeline.sh: pipeline parallelism on one host, cohort's schedules
# for libtorch (build/bench/pipeline_bench) against torch 2.13's
# torch.distributed.pipelining over gloo (bench/python/pipeline_step.py),
# the same MLP stack (8 x Linear(512, 512) + ReLU, cut evenly), batch 64,
# one thread per rank, each launched by cohortrun, alternating, REPS
# times; 2 and 4 ranks (4 oversubscribe 2 cores), GPipe and 1F1B (a
# stage a rank) and Interleaved1F1B (two stages a rank), 4, 8 and 16
# microbatches. Prints a markdown table of medians: step time,
# throughput, cohort's over torch's, and cohort's measured bubble (the
# largest over ranks, and per rank) beside the theory (p-1)/(m+p-1), or
# (p-1)/(2m+p-1) interleaved.
#
#   bench/compare_pipeline.sh [REPS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
source bench/lib/launch.sh
export OMP_NUM_THREADS=1
run_one() {
  local nproc="$1"
  shift
  run_launched compare_pipeline "pipeline_bench .*" "" "$nproc" "$@"
}
for ((rep = 0; rep < REPS; rep++)); do
  for p in 2 4; do
    for s in gpipe 1f1b interleaved; do
      for m in 4 8 16; do
        run_one "$p" build/bench/pipeline_bench --schedule "$s" --microbatches "$m"
        run_one "$p" bench/python/pipeline_step.py --backend gloo --schedule "$s" --microbatches "$m"
      done
    done
  done
done
"${COHORT_PYTHON:-python3}" - "$out/results" "$REPS" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"pipeline_bench (\S+) stages=(\d+) microbatches=(\d+) step_ms=([\d.]+) samples_per_s=(\d+)"
                 r"(?: bubble=([\d.]+) theory=([\d.]+) per_stage=(\S+))?", line)
    if not m:
        continue
    name, p, mb = m.group(1), int(m.group(2)), int(m.group(3))
    schedule = name.split("-")[-1]
    impl = "torch" if name.startswith("torch") else "cohort"
    runs.setdefault((p, schedule, mb, impl), []).append(m)
print(f"# pipeline: cohort vs torch's pipelining over gloo, medians of {sys.argv[2]} runs\n")
print("| stages | schedule | microbatches | cohort step (ms) | torch step (ms) | cohort / torch throughput "
      "| cohort bubble, largest stage | per stage | theory |")
print("|---|---|---|---|---|---|---|---|---|")
for (p, schedule, mb, impl) in sorted(k for k in runs if k[3] == "cohort"):
    c = runs[(p, schedule, mb, "cohort")]
    t = runs.get((p, schedule, mb, "torch"), [])
    cs = statistics.median(float(x.group(4)) for x in c)
    ts = statistics.median(float(x.group(4)) for x in t) if t else None
    bubble = statistics.median(float(x.group(6)) for x in c)
    per = sorted(c, key=lambda x: float(x.group(6)))[len(c) // 2].group(8)
    theory = float(c[0].group(7))
    ratio = f"{ts / cs:.2f}" if ts else "-"
    tst = f"{ts:.2f}" if ts else "-"
    print(f"| {p} | {schedule} | {mb} | {cs:.2f} | {tst} | {ratio} | {bubble:.3f} | {per} | {theory:.3f} |")
PY
