#!/usr/bin/env bash
# The RPC examples end to end under cohortrun: the batch-updating
# parameter server with two trainers, and the model split over two
# workers trained with distributed autograd and the distributed
# optimizer. Each program exits 1 when a trainer's loss did not halve;
# here, every trainer must also have printed its first and last loss.
#
#   rpc_examples_test.sh COHORTRUN PARAMETER_SERVER SPLIT_MODEL
set -euo pipefail
cohortrun="$1"
ps="$2"
split="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1

"$cohortrun" --standalone --nproc-per-node 3 "$ps" --steps 60 >"$tmp/ps" 2>&1 || {
  cat "$tmp/ps"; echo "FAIL: the parameter server's job failed"; exit 1; }
for r in 1 2; do
  grep -q "trainer $r: loss .* -> " "$tmp/ps" || { cat "$tmp/ps"; echo "FAIL: trainer $r said no loss"; exit 1; }
done
"$cohortrun" --standalone --nproc-per-node 2 "$split" --steps 60 >"$tmp/split" 2>&1 || {
  cat "$tmp/split"; echo "FAIL: the split model's job failed"; exit 1; }
grep -q "trainer: loss .* -> " "$tmp/split" || { cat "$tmp/split"; echo "FAIL: the trainer said no loss"; exit 1; }
echo "PASS: $(grep -ho 'trainer[ 0-9]*: loss .*' "$tmp/ps" "$tmp/split" | tr '\n' ';')"
