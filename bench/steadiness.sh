#!/usr/bin/env bash
# steadiness.sh: how much one fresh job's speed differs from the next. Runs
# JOBS fresh jobs (default 10) of each collective at 2 and 4 ranks on this
# host, for each of
#   bound     cohort-bench --spawn P --bind auto (a core or more each; where
#             P ranks outnumber the cores, neighbours share one)
#   unbound   cohort-bench --spawn P --bind none
#   cohortrun cohortrun --standalone --nproc-per-node P cohort-bench ...
#             (the launcher's defaults: --bind auto)
#   mpi       Open MPI's mpirun with its own defaults (it binds to cores
#             when the ranks fit), bench/mpi_bench
# jobs interleaved, each job in another order, so that all see the same machine. Each job gives one
# time per size, the median of its rounds (-R 11 rounds of -n 100 calls,
# each round's time the slowest rank's mean: a burst of the machine's
# other work moves one round, not the job); per size the table shows the
# median over the jobs and the slowest job over the fastest.
#
#   bench/steadiness.sh [JOBS=10] [OUT_DIR=bench/results]
#
# STEADY_COLLECTIVES (default "all_reduce all_gather reduce_scatter
# broadcast all_to_all"), STEADY_RANKS (default "2 4") and STEADY_SIZES
# (cohort-bench's size flags, default "-b 4K -e 4M -f 4") narrow a run.
# Writes OUT_DIR/steadiness.md and prints it. Needs build/ with
# tools/cohort-bench, tools/cohortrun and bench/mpi_bench, and mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
ensure_packages openmpi-bin
JOBS="${1:-10}"
OUT="${2:-bench/results}"
COLLECTIVES="${STEADY_COLLECTIVES:-all_reduce all_gather reduce_scatter broadcast all_to_all}"
RANKS="${STEADY_RANKS:-2 4}"
read -r -a SIZES <<<"${STEADY_SIZES:--b 4K -e 4M -f 4}"
mkdir -p "$OUT"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cores="$(nproc)"
ITERS=(-n 100 -R 11 -w 50)

for ((job = 0; job < JOBS; job++)); do
  for p in $RANKS; do
    oversubscribe=()
    [ "$p" -gt "$cores" ] && oversubscribe=(--oversubscribe)
    for c in $COLLECTIVES; do
      args=("$c" "${SIZES[@]}" "${ITERS[@]}" -c 0)
      # The modes take turns going first: a cohort job started right after
      # an Open MPI job ran 10-20% slower (2026-12-06), and with a fixed
      # order one column always paid for it.
      for ((k = 0; k < 4; k++)); do
        case $(((job + k) % 4)) in
          0) build/tools/cohort-bench "${args[@]}" --spawn "$p" --bind auto >"$raw/bound.$c.$p.$job" 2>&1 ;;
          1) build/tools/cohort-bench "${args[@]}" --spawn "$p" --bind none >"$raw/unbound.$c.$p.$job" 2>&1 ;;
          2) build/tools/cohortrun --standalone --nproc-per-node "$p" build/tools/cohort-bench "${args[@]}" \
               >"$raw/cohortrun.$c.$p.$job" 2>/dev/null ;;
          3) mpirun -np "$p" "${oversubscribe[@]}" build/bench/mpi_bench "${args[@]}" \
               >"$raw/mpi.$c.$p.$job" 2>/dev/null ;;
        esac
      done
    done
  done
  echo "job $((job + 1)) of $JOBS done" >&2
done

/usr/bin/python3 - "$raw" "$OUT" "$JOBS" "$COLLECTIVES" "$RANKS" <<'PY'
import glob, os, re, statistics, sys
raw, out, jobs, colls, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), sys.argv[5].split()
impls = ["bound", "unbound", "cohortrun", "mpi"]

def job_times(impl, coll, p):
    """{size: [one time per job]}, and whether the bound jobs were bound."""
    per_size, bound = {}, True
    for f in sorted(glob.glob(f"{raw}/{impl}.{coll}.{p}.*")):
        for line in open(f):
            line = re.sub(r"^\[rank\d+\]: ", "", line)  # cohortrun's prefix
            if line.startswith("# ranks unbound"):
                bound = False
            cols = line.split()
            if not line.startswith("#") and len(cols) >= 8 and cols[0].isdigit():
                per_size.setdefault(int(cols[0]), []).append(float(cols[5]))
    return per_size, bound

def size_text(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"

lines = [f"# Steadiness: {jobs} fresh jobs each, one host ({os.cpu_count()} CPUs)", "",
         "Per size: the median of the jobs' times (us), and the slowest job over the fastest.", ""]
worst = {}
for coll in colls:
    for p in ranks:
        data = {i: job_times(i, coll, p) for i in impls}
        note = "" if data["bound"][1] else " (cannot bind: fewer cores than ranks, so bound = unbound)"
        lines += [f"## {coll}, {p} ranks{note}", "",
                  "| size | " + " | ".join(f"{i} (us) | {i} slowest/fastest" for i in impls) + " |",
                  "|---|" + "---|---|" * len(impls)]
        for size in sorted(data["bound"][0]):
            row = [size_text(size)]
            for i in impls:
                t = data[i][0].get(size, [])
                if not t:
                    row += ["-", "-"]
                    continue
                spread = max(t) / min(t) if min(t) > 0 else float("nan")
                worst[i] = max(worst.get(i, 0), spread)
                row += [f"{statistics.median(t):.2f}", f"{spread:.2f}"]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
lines += ["Worst slowest/fastest over every row: " +
          ", ".join(f"{i} {worst.get(i, float('nan')):.2f}" for i in impls), ""]
text = "\n".join(lines)
open(os.path.join(out, "steadiness.md"), "w").write(text)
print(text)
PY
