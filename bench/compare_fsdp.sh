#!/usr/bin/env bash
# compare_fsdp.sh: fully sharded data parallel on one host, the same MLP
# (784-2048-2048-10, 5.8M parameters, each Linear a unit, the root last,
# SGD with momentum, batch 64 per rank, one thread per rank) four ways,
# each launched by cohortrun, alternating, REPS times; step time and the
# measured peak memory per rank (growth of VmHWM over model, optimizer
# and steps):
#  - cohort-cpp: cohort's fully_shard for libtorch (build/bench/fsdp_bench);
#  - cohort-cpp-keep: the same with reshard_after_forward off (each unit
#    gathered once a step instead of twice);
#  - cohort-ddp: cohort's DistributedDataParallel on the same model (the
#    same program, --mode ddp);
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
source bench/lib/launch.sh
export OMP_NUM_THREADS=1
# Each configuration runs twice: for its time as it is, and for its memory
# with large blocks mmapped and unmapped when freed (so that freed memory
# leaves the resident size; it costs page faults, hence not timed).
run_one() {
  local label="$1" nproc="$2"
  shift 2
  if [ "$label" = mem ]; then
    MALLOC_MMAP_THRESHOLD_=262144 run_launched compare_fsdp "fsdp_bench .*" "$label" "$nproc" "$@"
  else
    run_launched compare_fsdp "fsdp_bench .*" "$label" "$nproc" "$@"
  fi
}
for ((rep = 0; rep < REPS; rep++)); do
  for p in 2 4; do
    for label in time mem; do
      flag=()
      [ "$label" = mem ] && flag=(--memory)
      run_one "$label" "$p" build/bench/fsdp_bench --batch 64 "${flag[@]}"
      run_one "$label" "$p" build/bench/fsdp_bench --batch 64 --no-reshard-after-forward "${flag[@]}"
      run_one "$label" "$p" build/bench/fsdp_bench --batch 64 --mode ddp "${flag[@]}"
      for backend in gloo cohort; do
        run_one "$label" "$p" bench/python/fsdp_step.py --backend "$backend" --batch 64
      done
    done
  done
done
"${COHORT_PYTHON:-python3}" - "$out/results" "$REPS" <<'PY'
import re, statistics, sys
runs, mems = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) fsdp_bench ([\w-]+) world=(\d+) batch=(\d+) step_ms=([\d.]+) peak_mb=([\d.]+) held_mb=([\d.]+)", line)
    if m:
        (mems if m[1] == "mem" else runs).setdefault((int(m[3]), m[2]), []).append(
            (float(m[5]), float(m[6]), float(m[7])))
names = [("cohort-cpp", "cohort FSDP"), ("cohort-cpp-keep", "cohort FSDP, reshard off"), ("cohort-ddp", "cohort DDP"), ("gloo", "torch FSDP over gloo"),
         ("cohort", "torch FSDP over cohort")]
print(f"# MLP 784-2048-2048-10, batch 64 per rank, median of {sys.argv[2]} runs "
      "(step ms / peak MiB / MiB held between steps, per rank)\n")
print("| ranks | " + " | ".join(n for _, n in names) + " | cohort FSDP / DDP (time) | cohort FSDP / torch over gloo (time) |")
print("|---|" + "---|" * (len(names) + 2))
def med(p, key, i):
    v = (runs if i == 0 else mems).get((p, key))
    return statistics.median(x[i] for x in v) if v else None
for p in sorted({k[0] for k in runs}):
    cells = []
    for key, _ in names:
        t, m, h = med(p, key, 0), med(p, key, 1), med(p, key, 2)
        cells.append(f"{t:.2f} / {m:.0f} / {h:.0f}" if t is not None else "-")
    c, d, g = med(p, "cohort-cpp", 0), med(p, "cohort-ddp", 0), med(p, "gloo", 0)
    ratio = lambda a, b: f"{a / b:.2f}" if a is not None and b else "-"
    print(f"| {p} | " + " | ".join(cells) + f" | {ratio(c, d)} | {ratio(c, g)} |")
PY
