#!/usr/bin/env bash
# calibrate_crowding.sh: measures what a crowded machine (more ranks than
# CPUs) costs each rank, as the cost model prices it
# (CostModel::on_crowded_machine, src/algorithms/cost_model.cc), and prints
# the settings that tell the model:
#
#   COHORT_COST_CROWDED_MESSAGE_US  a message of many in flight, per rank's CPU:
#                                   pairwise all_to_all of 4-byte blocks, 2(P-1)
#                                   messages a rank posted at once
#   COHORT_COST_CROWDED_STEP_US     a step that waits for a message, per rank:
#                                   Bruck's all_to_all, ceil(log2 P) steps
#
# each the job's time over its messages (or steps) and over the ranks a
# CPU runs, median of JOBS fresh jobs (each the median of 3 rounds). P
# ranks over loopback TCP (shared memory off), bound by cohort-bench's
# default, R = P / (the CPUs this shell may use) a CPU.
#
#   bench/calibrate_crowding.sh [P=16] [JOBS=5]
#
# Needs build/tools/cohort-bench. The defaults in cost_model.cc came from
# this measurement on a 2-vCPU VM (2.3 and 9.4 us).
set -euo pipefail
cd "$(dirname "$0")/.."
P="${1:-16}"
JOBS="${2:-5}"
BENCH=build/tools/cohort-bench
[ -x "$BENCH" ] || { echo "calibrate_crowding.sh: build $BENCH first (scripts/test or cmake --build build)" >&2; exit 1; }
CPUS=$(nproc)
if [ "$P" -le "$CPUS" ]; then
  echo "calibrate_crowding.sh: $P ranks on $CPUS CPUs are not crowded; give more ranks than CPUs" >&2
  exit 1
fi

# one_job ALGORITHM: the time (us) of one fresh job's 4-byte-block all_to_all.
one_job() {
  COHORT_SHM=off COHORT_ALGO="all_to_all=$1" "$BENCH" all_to_all -b 4 -e 4 -n 200 -w 20 -R 3 --spawn "$P" 2>&1 |
    awk '$1 ~ /^[0-9]+$/ { print $6 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

pairwise=() bruck=()
for ((j = 0; j < JOBS; j++)); do
  pairwise+=("$(one_job pairwise)")
  bruck+=("$(one_job bruck)")
done
t_pairwise=$(printf '%s\n' "${pairwise[@]}" | median)
t_bruck=$(printf '%s\n' "${bruck[@]}" | median)

awk -v p="$P" -v cpus="$CPUS" -v tp="$t_pairwise" -v tb="$t_bruck" -v jobs="$JOBS" \
    -v all_p="${pairwise[*]}" -v all_b="${bruck[*]}" 'BEGIN {
  r = p / cpus
  steps = 0
  for (n = 1; n < p; n *= 2) steps++
  message = tp / (2 * (p - 1)) / r
  step = tb / steps / r
  printf "# %d ranks over TCP on %d CPUs (%.1f a CPU), all_to_all of 4-byte blocks, median of %d jobs\n", p, cpus, r, jobs
  printf "# pairwise: %.1f us (jobs: %s), %d messages a rank\n", tp, all_p, 2 * (p - 1)
  printf "# bruck:    %.1f us (jobs: %s), %d steps\n", tb, all_b, steps
  printf "COHORT_COST_CROWDED_MESSAGE_US=%.2f\n", message
  printf "COHORT_COST_CROWDED_STEP_US=%.2f\n", step
}'
