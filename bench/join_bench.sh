#!/usr/bin/env bash
# join_bench: how long P ranks on this host take to join a group and pass
# one barrier, cohort against torch 2.13's Gloo, both started by cohortrun
# (issue 48: joining at scale). Every worker first starts and loads its
# libraries (Python and `import torch` for Gloo), says "ready" and waits on
# a shared lock that this script holds; once all are ready the script lets
# go, and the time is from then to the last rank through its barrier. So
# the columns compare joining alone: the rendezvous, the connections, the
# shared-memory set-up, the barrier.
#
# Beside them, cohort's whole job from cohortrun's start to its exit
# (bench/launch_cohort: start, init, barrier, exit): what a user waits.
#
#   bench/join_bench.sh [BUILD_DIR] [RUNS] [RANKS...]    (default: build 3 16 64 128)
#
# COHORT_PYTHON names the Python with torch (python3). Gloo's workers at
# 128 ranks need about 10 GiB of memory and minutes to import torch;
# JOIN_BENCH_GLOO=off leaves Gloo out (its columns print "-"), for cohort's
# columns alone on a machine that no torch processes have just left.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}" runs="${2:-3}"
shift $(($# < 2 ? $# : 2))
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(16 64 128)
python="${COHORT_PYTHON:-python3}"
cohortrun="$build/tools/cohortrun"
for f in "$cohortrun" "$build/bench/join_cohort" "$build/bench/launch_cohort"; do
  [ -x "$f" ] || { echo "missing $f (build it first)" >&2; exit 1; }
done
with_gloo="${JOIN_BENCH_GLOO:-on}"
if [ "$with_gloo" != off ]; then
  $python -c "import torch.distributed" 2>/dev/null ||
    { echo "Gloo needs torch in $python (pip install torch==2.13.0)" >&2; exit 1; }
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/lib/median.sh"
free_port() { $python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# released P COMMAND...: runs the job with every worker held at the lock,
# lets them go once all P said "ready", and prints the milliseconds from
# then to the last "done" time a worker printed.
released() {
  local n="$1"
  shift
  local lock="$scratch/release" out="$scratch/out"
  : >"$lock"
  : >"$out"
  exec 9>"$lock"
  flock -x 9
  RELEASE_FILE="$lock" "$@" >"$out" 2>&1 &
  local pid=$! waited=0
  until [ "$(grep -c 'ready$' "$out" || true)" -ge "$n" ]; do
    sleep 0.1
    waited=$((waited + 1))
    if [ "$waited" -gt 6000 ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "the workers never all got ready: $*" >&2
      tail -20 "$out" >&2
      exit 1
    fi
  done
  local t0
  t0=$(date +%s.%N)
  flock -u 9
  exec 9>&-
  wait "$pid" || { echo "failed: $*" >&2; tail -20 "$out" >&2; exit 1; }
  local last
  last=$(grep -o 'done [0-9.]*' "$out" | awk '{print $2}' | sort -n | tail -1)
  [ "$(grep -c 'done [0-9.]*' "$out")" -eq "$n" ] || { echo "not every rank finished: $*" >&2; exit 1; }
  awk -v a="$t0" -v b="$last" 'BEGIN {printf "%d\n", (b - a) * 1000}'
}

# whole P: cohortrun's start to its exit for launch_cohort, in ms.
whole() {
  local t0 t1
  t0=$(date +%s%N)
  "$cohortrun" --standalone --nproc-per-node "$1" "$build/bench/launch_cohort" >/dev/null 2>&1 ||
    { echo "failed: launch_cohort at $1" >&2; exit 1; }
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}

echo "| ranks | cohort join (ms) | cohort join, COHORT_SHM=off (ms) | Gloo join (ms) | cohort / Gloo | cohort, launch to exit (ms) |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in "${ranks[@]}"; do
  c=() o=() g=() w=()
  for _ in $(seq 1 "$runs"); do
    # cohort's three first: the memory that P torch processes give back
    # as they exit is still being freed for a while after.
    c+=("$(released "$n" "$cohortrun" --standalone --nproc-per-node "$n" "$build/bench/join_cohort")")
    o+=("$(COHORT_SHM=off released "$n" "$cohortrun" --standalone --nproc-per-node "$n" "$build/bench/join_cohort")")
    w+=("$(whole "$n")")
    [ "$with_gloo" = off ] && continue
    g+=("$(JOIN_STORE_PORT="$(free_port)" OMP_NUM_THREADS=1 released "$n" "$cohortrun" --standalone \
      --nproc-per-node "$n" "$python" "$root/bench/join/join_gloo.py")")
    sleep 2
  done
  cm=$(printf '%s\n' "${c[@]}" | median) om=$(printf '%s\n' "${o[@]}" | median)
  wm=$(printf '%s\n' "${w[@]}" | median) gm="-" vs="-"
  if [ "$with_gloo" != off ]; then
    gm=$(printf '%s\n' "${g[@]}" | median)
    vs=$(awk -v a="$cm" -v b="$gm" 'BEGIN {printf "%.2f", a / b}')
  fi
  echo "| $n | $cm | $om | $gm | $vs | $wm |"
done
