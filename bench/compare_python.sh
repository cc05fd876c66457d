#!/usr/bin/env bash
# compare_python.sh: torch.distributed's collectives from Python over cohort
# (import cohort_torch) and over Gloo, side by side in one run: all_reduce,
# all_gather, reduce_scatter and broadcast, 4 B to 64 MiB, at 2 and 4
# ranks on this host, alternating, each repeated REPS times; prints a
# markdown table per collective and world size (medians) with cohort's
# speed-up over Gloo.
#
#   bench/compare_python.sh [REPS=3] [WORLD_SIZES="2 4"] [COLLECTIVES="all_reduce all_gather reduce_scatter broadcast"]
#
# Needs build/bench/torch_collectives and build/python (scripts/test builds
# both when torch is found).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-3}"
SIZES_P="${2:-2 4}"
COLLS="${3:-all_reduce all_gather reduce_scatter broadcast}"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# Small sizes need many iterations to time; large ones few.
SMALL=(-b 4 -e 256K -f 4 -n 200 -w 20)
LARGE=(-b 1M -e 64M -f 4 -n 10 -w 2)
for ((rep = 0; rep < REPS; rep++)); do
  for p in $SIZES_P; do
    for c in $COLLS; do
      for sweep in SMALL LARGE; do
        declare -n args="$sweep"
        for backend in cohort gloo; do
          build/bench/torch_collectives "$c" --backend "$backend" "${args[@]}" --spawn "$p" \
            >"$raw/$backend.$c.$p.$sweep.$rep" 2>/dev/null || echo "compare_python: $backend $c P=$p failed" >&2
        done
      done
    done
  done
done
"${COHORT_PYTHON:-python3}" - "$raw" "$REPS" <<'PY'
import glob, os, statistics, sys
raw, reps = sys.argv[1], sys.argv[2]
rows = {}
for f in glob.glob(f"{raw}/*"):
    backend, coll, p = os.path.basename(f).split(".")[:3]
    for line in open(f):
        cols = line.split()
        if line.startswith("#") or len(cols) < 8 or not cols[0].isdigit():
            continue
        rows.setdefault((coll, int(p)), {}).setdefault(int(cols[0]), {}).setdefault(backend, []).append(
            (float(cols[5]), float(cols[7])))
print(f"torch.distributed from Python over cohort and over Gloo, one host, median of {reps} runs\n")
for (coll, p) in sorted(rows):
    print(f"### {coll}, {p} ranks\n")
    print("| size (B) | cohort time (us) | gloo time (us) | cohort busbw (GB/s) | gloo busbw (GB/s) | gloo time / cohort time |")
    print("|---|---|---|---|---|---|")
    for size in sorted(rows[(coll, p)]):
        r = rows[(coll, p)][size]
        if "cohort" not in r or "gloo" not in r:
            continue
        c = [statistics.median(x[i] for x in r["cohort"]) for i in (0, 1)]
        g = [statistics.median(x[i] for x in r["gloo"]) for i in (0, 1)]
        print(f"| {size} | {c[0]:.1f} | {g[0]:.1f} | {c[1]:.3f} | {g[1]:.3f} | {g[0] / c[0]:.1f} |")
    print()
PY
