#!/usr/bin/env bash
# The FSDP example end to end: two ranks under cohortrun train the demo's
# network sharded for one epoch (test accuracy above 95%), and the MLP
# stack with bf16 parameters and reshard_after_forward off (the loss of
# the last step below the first's); each rank holds half the parameters
# between steps.
#
#   train_fsdp_test.sh COHORTRUN TRAIN_FSDP
set -euo pipefail
cohortrun="$1"
train="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$cohortrun" --standalone --nproc-per-node 2 "$train" --epochs 1 >"$tmp/mnist" 2>&1 || {
  cat "$tmp/mnist"; echo "FAIL: the mnist launch failed"; exit 1; }
accuracy="$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$tmp/mnist")"
[ -n "$accuracy" ] || { cat "$tmp/mnist"; echo "FAIL: no test accuracy"; exit 1; }
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$accuracy') > 95 else 1)" || {
  cat "$tmp/mnist"; echo "FAIL: test accuracy $accuracy% is not above 95%"; exit 1; }
grep -q "(50.0%)" "$tmp/mnist" || { cat "$tmp/mnist"; echo "FAIL: rank 0 does not hold half the parameters"; exit 1; }

"$cohortrun" --standalone --nproc-per-node 2 "$train" --model mlp --steps 30 --mixed-precision \
  --no-reshard-after-forward >"$tmp/mlp" 2>&1 || { cat "$tmp/mlp"; echo "FAIL: the mlp launch failed"; exit 1; }
losses="$(sed -n 's/.*step [0-9]*\/30: loss \([0-9.]*\).*/\1/p' "$tmp/mlp")"
first="$(head -1 <<<"$losses")"
last="$(tail -1 <<<"$losses")"
[ -n "$first" ] || { cat "$tmp/mlp"; echo "FAIL: no loss lines"; exit 1; }
/usr/bin/python3 -c "import sys; sys.exit(0 if $last < $first else 1)" || {
  cat "$tmp/mlp"; echo "FAIL: the loss went from $first to $last"; exit 1; }
echo "PASS: mnist test accuracy $accuracy%, mlp loss $first -> $last"
