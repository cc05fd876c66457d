#!/usr/bin/env bash
# compare_symmetric.sh: all_reduce on one host, cohort's buffers in ordinary
# memory and in symmetric memory (cohort-bench --symmetric), against Open
# MPI 4.1 (bench/mpi_bench under mpirun) and libtorch's Gloo
# (bench/gloo_bench), run back to back in each repetition; prints a markdown
# table of the medians per world size and the ratios of times.
#
#   bench/compare_symmetric.sh [REPS=5] ["WORLD_SIZES"="2 4"]
#
# Needs build/ with tools/cohort-bench, bench/mpi_bench and bench/gloo_bench
# (scripts/test builds them) and mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-5}"
SIZES_P="${2:-2 4}"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ARGS=(all_reduce -b 64K -e 64M -f 4 -n 20 -w 3)
for ((i = 0; i < REPS; i++)); do
  for p in $SIZES_P; do
    build/tools/cohort-bench "${ARGS[@]}" --spawn "$p" >"$raw/ordinary.$p.$i"
    build/tools/cohort-bench "${ARGS[@]}" --spawn "$p" --symmetric >"$raw/symmetric.$p.$i"
    mpirun -np "$p" --oversubscribe build/bench/mpi_bench "${ARGS[@]}" >"$raw/mpi.$p.$i" 2>/dev/null
    build/bench/gloo_bench "${ARGS[@]}" --spawn "$p" >"$raw/gloo.$p.$i" 2>/dev/null
  done
done
/usr/bin/python3 - "$raw" "$REPS" "$SIZES_P" <<'PY'
import glob, statistics, sys
raw, reps, ps = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def load(impl, p):
    runs = {}
    for f in glob.glob(f"{raw}/{impl}.{p}.*"):
        for line in open(f):
            cols = line.split()
            if not line.startswith("#") and len(cols) >= 8 and cols[0].isdigit():
                runs.setdefault(int(cols[0]), []).append(float(cols[5]))
    return {s: statistics.median(v) for s, v in runs.items()}
print(f"all_reduce float32 SUM on one host, time in us, median of {reps} runs\n")
for p in ps:
    o, s, m, g = (load(x, p) for x in ("ordinary", "symmetric", "mpi", "gloo"))
    print(f"### {p} ranks\n")
    print("| size (B) | cohort ordinary | cohort symmetric | Open MPI | Gloo | MPI / symmetric | MPI / ordinary | Gloo / symmetric |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sorted(s):
        if size in o and size in m and size in g:
            print(f"| {size} | {o[size]:.1f} | {s[size]:.1f} | {m[size]:.1f} | {g[size]:.1f} | "
                  f"{m[size] / s[size]:.2f} | {m[size] / o[size]:.2f} | {g[size] / s[size]:.2f} |")
    print()
PY
