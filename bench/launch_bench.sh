#!/usr/bin/env bash
# launch_bench: wall time of launch + init + first barrier + exit, for 2, 4
# and 8 workers on this host with --standalone: cohortrun running
# bench/launch_cohort (init_process_group env://, barrier) against torch
# 2.13's torchrun running bench/launch_gloo (init_process_group("gloo")
# env://, barrier, in Python: what torchrun's users run). Both launchers
# check their workers every 0.1 s by default. Prints a markdown table of
# medians, and beside it what one torch worker costs alone (world size 1,
# no launcher: Python's start, import torch, a TCPStore, a Gloo barrier),
# the part of torchrun's time that is the worker's, not the launcher's.
#
#   bench/launch_bench.sh [BUILD_DIR] [RUNS]
#
# BUILD_DIR holds tools/cohortrun, bench/launch_cohort and bench/launch_gloo
# (default build). COHORT_PYTHON names the Python with torch (python3).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}" runs="${2:-7}"
python="${COHORT_PYTHON:-python3}"
cohortrun="$build/tools/cohortrun" cohort_prog="$build/bench/launch_cohort" gloo_prog="$build/bench/launch_gloo"
for f in "$cohortrun" "$cohort_prog" "$gloo_prog"; do
  [ -x "$f" ] || { echo "missing $f (build it first)" >&2; exit 1; }
done
$python -c "import torch.distributed.run" 2>/dev/null || { echo "torchrun needs torch in $python (pip install torch==2.13.0)" >&2; exit 1; }

# ms runs its arguments quietly and prints their wall time in milliseconds.
ms() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
source "$(dirname "${BASH_SOURCE[0]}")/lib/median.sh"

torchrun() {
  env OMP_NUM_THREADS=1 "$python" -m torch.distributed.run --standalone --nproc_per_node "$1" --no_python "$gloo_prog"
}
# gloo_alone: one torch worker without a launcher, world size 1.
gloo_alone() {
  local port
  port="$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  env OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" RANK=0 WORLD_SIZE=1 "$gloo_prog"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }

echo "| workers | cohortrun (ms) | torchrun (ms) | cohortrun / torchrun | one torch worker alone (ms) |"
echo "|---:|---:|---:|---:|---:|"
for n in 2 4 8; do
  c=() t=() a=()
  for _ in $(seq 1 "$runs"); do
    c+=("$(ms "$cohortrun" --standalone --nproc-per-node "$n" "$cohort_prog")")
    t+=("$(ms torchrun "$n")")
    a+=("$(ms gloo_alone)")
  done
  cm=$(printf '%s\n' "${c[@]}" | median) tm=$(printf '%s\n' "${t[@]}" | median)
  am=$(printf '%s\n' "${a[@]}" | median)
  echo "| $n | $cm | $tm | $(ratio "$cm" "$tm") | $am |"
done
