#!/usr/bin/env bash
# straggler_cost.sh: what the always-on straggler accounting costs a job
# (docs/stragglers.md). Runs JOBS fresh 2-rank jobs (default 9) of
#   cohort-bench all_reduce -b 4 -e 64K -f 4 --spawn 2 --bind auto
# for each of
#   off    COHORT_STRAGGLER_INTERVAL_S=0 (no accounting)
#   on     the default, 1 (each rank's monitor publishes once a second, rank 0 joins)
#   fast   0.1: ten times the default's work, to show a cost the default would hide
# interleaved, so that all see the same machine. Each job gives one time
# per size (the median of its -R 11 rounds of 100000 calls, each the
# slowest rank's mean; a job lasts about 6 s, so the accounting ticks);
# the table shows per size the median over the jobs and its ratio to off.
#
#   bench/straggler_cost.sh [JOBS=9]
#
# Needs build/tools/cohort-bench.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${1:-9}"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
args=(all_reduce -b 4 -e 64K -f 4 -n 100000 -R 11 -w 1000 -c 0 --spawn 2 --bind auto)
for ((job = 0; job < JOBS; job++)); do
  COHORT_STRAGGLER_INTERVAL_S=0 build/tools/cohort-bench "${args[@]}" >"$raw/off.$job" 2>&1
  COHORT_STRAGGLER_INTERVAL_S=1 build/tools/cohort-bench "${args[@]}" >"$raw/on.$job" 2>&1
  COHORT_STRAGGLER_INTERVAL_S=0.1 build/tools/cohort-bench "${args[@]}" >"$raw/fast.$job" 2>&1
  echo "job $((job + 1)) of $JOBS done" >&2
done
/usr/bin/python3 - "$raw" "$JOBS" <<'PY'
import glob, os, statistics, sys
raw, jobs = sys.argv[1], int(sys.argv[2])
def times(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 8 and f[0].isdigit():
            out[int(f[0])] = float(f[5])
    return out
table = {m: {} for m in ("off", "on", "fast")}
for m in table:
    for j in range(jobs):
        for size, t in times(os.path.join(raw, f"{m}.{j}")).items():
            table[m].setdefault(size, []).append(t)
print(f"all_reduce, 2 ranks bound, median of {jobs} jobs (us); ratio to off")
print("| size | off | on (1 s) | on / off | fast (0.1 s) | fast / off |")
print("|---|---|---|---|---|---|")
for size in sorted(table["off"]):
    off, on, fast = (statistics.median(table[m][size]) for m in ("off", "on", "fast"))
    print(f"| {size} B | {off:.3f} | {on:.3f} | {on / off:.3f} | {fast:.3f} | {fast / off:.3f} |")
PY
