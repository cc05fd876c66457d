#!/usr/bin/env bash
# compare_tcp.sh: cohort's all_reduce over TCP and libtorch's Gloo, side by
# side in one run (the same sizes, world size and iteration counts), each
# repeated REPS times; prints a markdown table of the medians and the ratios.
#
#   bench/compare_tcp.sh [WORLD_SIZE=2] [REPS=3]
#
# Needs build/tools/cohort-bench and build/bench/gloo_bench (scripts/test
# builds both). COHORT_SHM=off keeps cohort on TCP over loopback (ranks on
# one host would otherwise use shared memory: see compare_shm.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
P="${1:-2}"
REPS="${2:-3}"
ARGS=(all_reduce -b 4 -e 64M -f 4 -n 20 -w 5)
out="$(mktemp -d)"
for ((i = 0; i < REPS; i++)); do
  COHORT_SHM=off build/tools/cohort-bench "${ARGS[@]}" --spawn "$P" >"$out/cohort.$i"
  build/bench/gloo_bench "${ARGS[@]}" --spawn "$P" 2>/dev/null >"$out/gloo.$i"
done
/usr/bin/python3 - "$out" "$REPS" "$P" <<'PY'
import glob, statistics, sys
out, reps, p = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(name):
    runs = {}
    for f in glob.glob(f"{out}/{name}.*"):
        for line in open(f):
            cols = line.split()
            if not line.startswith("#") and len(cols) >= 8 and cols[0].isdigit():
                runs.setdefault(int(cols[0]), []).append((float(cols[5]), float(cols[7])))
    return {s: (statistics.median(t for t, _ in v), statistics.median(b for _, b in v)) for s, v in runs.items()}
c, g = load("cohort"), load("gloo")
print(f"all_reduce float32 SUM, {p} ranks over loopback TCP, median of {reps} runs\n")
print("| size (B) | cohort time (us) | gloo time (us) | cohort busbw (GB/s) | gloo busbw (GB/s) | time gloo / cohort |")
print("|---|---|---|---|---|---|")
for s in sorted(c):
    if s in g:
        print(f"| {s} | {c[s][0]:.1f} | {g[s][0]:.1f} | {c[s][1]:.3f} | {g[s][1]:.3f} | {g[s][0] / c[s][0]:.2f} |")
PY
rm -rf "$out"
