#!/usr/bin/env bash
# compare_builds.sh: two builds of cohort-bench side by side, to measure a
# change to the transport (the engine and its links): point-to-point
# ping-pong over shared memory and over TCP, and all_reduce over TCP, at 2
# ranks. Each repetition runs both builds back to back on every row, and
# the table gives the median time of each and the median of the
# per-repetition ratios (NEW / OLD: below 1 is faster), so that both sides
# of a ratio saw the same machine state.
#
#   bench/compare_builds.sh OLD_BENCH NEW_BENCH [REPS=5]
#
# A BENCH is a cohort-bench binary, or a script that runs one with its own
# library (LD_LIBRARY_PATH=old/lib exec old/cohort-bench "$@"): the
# binaries find libcohort through their RUNPATH otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD="$1"
NEW="$2"
REPS="${3:-5}"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# name | environment | cohort-bench arguments
CASES=(
  "ping_pong shm|COHORT_SHM=auto|ping_pong -b 4 -e 4M -f 16 -n 2000 -w 200"
  "ping_pong tcp|COHORT_SHM=off|ping_pong -b 4 -e 4M -f 16 -n 1000 -w 100"
  "all_reduce tcp|COHORT_SHM=off|all_reduce -b 4 -e 16M -f 16 -n 200 -w 20"
)
for ((r = 0; r < REPS; r++)); do
  for i in "${!CASES[@]}"; do
    IFS='|' read -r _ envs args <<<"${CASES[$i]}"
    # Alternate which build goes first, so that neither always follows the
    # other's warm (or cold) caches.
    order="old new"
    ((r % 2)) && order="new old"
    for side in $order; do
      bench="$OLD"
      [ "$side" = new ] && bench="$NEW"
      # shellcheck disable=SC2086
      env $envs "$bench" $args --spawn 2 | grep -E '^ +[0-9]' | awk '{print $1, $6}' >"$raw/$i.$side.$r"
    done
  done
done
/usr/bin/python3 - "$raw" "$REPS" "${CASES[@]}" <<'PY'
import statistics, sys
raw, reps, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(i, side, r):
    return {int(a): float(b) for a, b in (l.split() for l in open(f"{raw}/{i}.{side}.{r}"))}
print(f"# NEW against OLD, 2 ranks, median of {reps} repetitions (time in us)\n")
print("| case | bytes | OLD (us) | NEW (us) | NEW / OLD |")
print("|---|---|---|---|---|")
for i, case in enumerate(cases):
    name = case.split("|")[0]
    runs = [(load(i, "old", r), load(i, "new", r)) for r in range(reps)]
    for size in sorted(runs[0][0]):
        old = [o[size] for o, n in runs if size in o and size in n]
        new = [n[size] for o, n in runs if size in o and size in n]
        ratio = statistics.median(b / a for a, b in zip(old, new))
        print(f"| {name} | {size} | {statistics.median(old):.2f} | {statistics.median(new):.2f} | {ratio:.2f} |")
PY
