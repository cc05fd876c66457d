#!/usr/bin/env bash
# launch_bench: wall time of launch + init + first barrier + exit, for 2, 4
# and 8 workers on this host with --standalone: cohortrun running
# bench/launch_cohort (init_process_group env://, barrier) against torchrun
# (Debian's python3-torch) running bench/launch_gloo (libtorch TCPStore +
# ProcessGroupGloo, barrier). Prints a markdown table of medians: torchrun
# with its defaults (torch 1.13 checks workers every 5 s) and with
# --monitor_interval 0.1 (cohortrun's default), so that the launchers'
# own costs compare too.
#
# Debian's torch 1.13 under Python 3.11 cannot parse --redirects/--tee 0
# (IntFlag no longer lists NONE), so torchrun runs with -r 1 -t 1: stdout
# to a log file and the console, as cohortrun always keeps log files.
#
#   bench/launch_bench.sh [BUILD_DIR] [TORCH_BUILD_DIR] [RUNS]
#
# BUILD_DIR holds tools/cohortrun and bench/launch_cohort (default build);
# TORCH_BUILD_DIR holds bench/launch_gloo (default: BUILD_DIR, which has it
# when libtorch was found).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}" torch_build="${2:-${1:-$root/build}}" runs="${3:-7}"
python=/usr/bin/python3
cohortrun="$build/tools/cohortrun" cohort_prog="$build/bench/launch_cohort" gloo_prog="$torch_build/bench/launch_gloo"
for f in "$cohortrun" "$cohort_prog" "$gloo_prog"; do
  [ -x "$f" ] || { echo "missing $f (build it first)" >&2; exit 1; }
done
$python -c "import torch.distributed.run" 2>/dev/null || { echo "torchrun needs python3-torch" >&2; exit 1; }

# ms runs its arguments quietly and prints their wall time in milliseconds.
ms() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }

torchrun() {
  env OMP_NUM_THREADS=1 $python -m torch.distributed.run --standalone --nproc_per_node "$1" -r 1 -t 1 "${@:2}" \
    --no_python "$gloo_prog"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }

echo "| workers | cohortrun (ms) | torchrun (ms) | ratio | torchrun --monitor_interval 0.1 (ms) | ratio |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in 2 4 8; do
  c=() t=() f=()
  for _ in $(seq 1 "$runs"); do
    c+=("$(ms "$cohortrun" --standalone --nproc-per-node "$n" "$cohort_prog")")
    t+=("$(ms torchrun "$n")")
    f+=("$(ms torchrun "$n" --monitor_interval 0.1)")
  done
  cm=$(printf '%s\n' "${c[@]}" | median) tm=$(printf '%s\n' "${t[@]}" | median)
  fm=$(printf '%s\n' "${f[@]}" | median)
  echo "| $n | $cm | $tm | $(ratio "$cm" "$tm") | $fm | $(ratio "$cm" "$fm") |"
done
