#!/usr/bin/env bash
# compare_mpi.sh: the cost of cohort's MPI layer. Side by side, in one run:
# cohort's native backend (shared memory); cohort's mpi backend as
# configured by default (blocking MPI calls, on the caller's thread when the
# group is idle), with COHORT_MPI_THREAD=worker (every call handed to the
# group's worker thread) and with COHORT_MPI_WAIT=poll (non-blocking MPI
# calls polled against the deadline); and raw Open MPI (bench/mpi_bench), at
# MPI_THREAD_SINGLE and at MPI_THREAD_SERIALIZED (cohort's level). Same sizes, ranks and iterations; each repeated REPS
# times, alternating, so that all see the same machine load. Prints a
# markdown table of median times and writes it to OUT_DIR/compare_mpi.md.
#
#   bench/compare_mpi.sh [REPS=3] [OUT_DIR=bench/results] [RANKS="2"] [COLLS="all_reduce all_gather"]
#
# Needs build/ with tools/cohort-bench and bench/mpi_bench, and mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-3}"
OUT="${2:-bench/results}"
RANKS="${3:-2}"
COLLS="${4:-all_reduce all_gather}"
mkdir -p "$OUT"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
root_flags=()
[ "$(id -u)" = 0 ] && root_flags=(--allow-run-as-root)
# The same mpirun for cohort's mpi backend and for raw MPI.
mpirun_np() { mpirun "${root_flags[@]}" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np "$@"; }
SMALL=(-b 1K -e 256K -f 4 -n 2000 -w 50)
LARGE=(-b 1M -e 16M -f 4 -n 20 -w 3)
for ((rep = 0; rep < REPS; rep++)); do
  for p in $RANKS; do
    for c in $COLLS; do
      for sweep in SMALL LARGE; do
        declare -n args="$sweep"
        build/tools/cohort-bench "$c" "${args[@]}" --spawn "$p" >"$raw/native.$c.$p.$sweep.$rep"
        mpirun_np "$p" build/tools/cohort-bench "$c" "${args[@]}" --backend mpi \
          >"$raw/mpi_default.$c.$p.$sweep.$rep"
        COHORT_MPI_THREAD=worker mpirun_np "$p" build/tools/cohort-bench "$c" "${args[@]}" --backend mpi \
          >"$raw/mpi_worker.$c.$p.$sweep.$rep"
        COHORT_MPI_WAIT=poll mpirun_np "$p" build/tools/cohort-bench "$c" "${args[@]}" --backend mpi \
          >"$raw/mpi_poll.$c.$p.$sweep.$rep"
        mpirun_np "$p" build/bench/mpi_bench "$c" "${args[@]}" >"$raw/raw.$c.$p.$sweep.$rep"
        MPI_BENCH_THREAD_LEVEL=serialized mpirun_np "$p" build/bench/mpi_bench "$c" "${args[@]}" \
          >"$raw/raw_serialized.$c.$p.$sweep.$rep"
        unset -n args
      done
    done
  done
done

/usr/bin/python3 - "$raw" "$OUT" "$REPS" "$RANKS" "$COLLS" <<'PY'
import glob, statistics, sys
raw, out, reps, ranks, colls = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), sys.argv[5].split()

def load(impl, coll, p):
    runs = {}
    for f in glob.glob(f"{raw}/{impl}.{coll}.{p}.*"):
        for line in open(f):
            cols = line.split()
            if not line.startswith("#") and len(cols) >= 8 and cols[0].isdigit():
                runs.setdefault(int(cols[0]), []).append(float(cols[5]))
    return {s: statistics.median(v) for s, v in runs.items()}

lines = [f"# cohort's mpi backend vs raw Open MPI, one host, time (us), median of {reps} runs", ""]
for coll in colls:
    for p in ranks:
        n, w, c, q, r, rs = (load(i, coll, p) for i in
                             ("native", "mpi_default", "mpi_worker", "mpi_poll", "raw", "raw_serialized"))
        lines += [f"## {coll}, {p} ranks", "",
                  "| size (B) | cohort native | cohort mpi (default) | cohort mpi (worker) | cohort mpi (poll) "
                  "| raw Open MPI | raw, SERIALIZED | default / raw | default / raw SERIALIZED | worker / raw "
                  "| poll / raw |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for s in sorted(r):
            f = lambda d: f"{d[s]:.2f}" if s in d else "-"
            ratio = lambda d, base=r: f"{d[s] / base[s]:.2f}" if s in d and s in base and base[s] > 0 else "-"
            lines.append(f"| {s} | {f(n)} | {f(w)} | {f(c)} | {f(q)} | {f(r)} | {f(rs)} | {ratio(w)} "
                         f"| {ratio(w, rs)} | {ratio(c)} | {ratio(q)} |")
        lines.append("")
lines.append("default: blocking MPI calls, on the caller's thread when the group is idle; "
             "worker: COHORT_MPI_THREAD=worker (every call on the group's worker thread); "
             "poll: COHORT_MPI_WAIT=poll. raw Open MPI: bench/mpi_bench at MPI_THREAD_SINGLE (no locks in "
             "Open MPI); raw, SERIALIZED: the same at MPI_THREAD_SERIALIZED, the level cohort's mpi backend "
             "runs at (as torch's ProcessGroupMPI), in which Open MPI locks inside every call. "
             "x / raw: that time over raw MPI's (1.00 = no overhead).")
open(f"{out}/compare_mpi.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
