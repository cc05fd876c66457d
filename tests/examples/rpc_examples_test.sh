#!/usr/bin/env bash
# The RPC examples end to end under cohortrun: the batch-updating
# parameter server with two trainers, the model split over two workers
# trained with distributed autograd and the distributed optimizer, and DDP
# combined with RPC. Each program exits 1 when a trainer's loss did not
# halve (ddp_with_rpc also when the context's dense gradient is not the
# trainers' average, the trainers' dense parts differ, or .grad was
# written); here, every trainer must also have printed its results.
#
#   rpc_examples_test.sh COHORTRUN PARAMETER_SERVER SPLIT_MODEL DDP_WITH_RPC
set -euo pipefail
cohortrun="$1"
ps="$2"
split="$3"
hybrid="$4"
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
"$cohortrun" --standalone --nproc-per-node 3 "$hybrid" --steps 60 >"$tmp/hybrid" 2>&1 || {
  cat "$tmp/hybrid"; echo "FAIL: the DDP with RPC job failed"; exit 1; }
for r in 1 2; do
  for said in "trainer $r: the context's dense gradient is the trainers' average: yes" \
      "trainer $r: dense parts equal: yes, .grad untouched: yes" "trainer $r: loss .* -> "; do
    grep -q "$said" "$tmp/hybrid" || { cat "$tmp/hybrid"; echo "FAIL: no '$said'"; exit 1; }
  done
done
echo "PASS: $(grep -ho 'trainer[ 0-9]*: loss .*' "$tmp/ps" "$tmp/split" "$tmp/hybrid" | tr '\n' ';')"
