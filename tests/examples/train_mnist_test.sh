#!/usr/bin/env bash
# The demo's training job end to end: two ranks under cohortrun train on
# generated digits for one epoch (writing a checkpoint), then a second
# launch resumes from it for a second epoch; the test accuracy must pass
# 95%, and rank 0's progress lines must be there.
#
#   train_mnist_test.sh COHORTRUN TRAIN_MNIST
set -euo pipefail
cohortrun="$1"
train="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
args=(--train-samples 16000 --test-samples 1000 --checkpoint "$tmp/ckpt")

"$cohortrun" --standalone --nproc-per-node 2 "$train" "${args[@]}" --epochs 1 >"$tmp/first" 2>&1 || {
  cat "$tmp/first"; echo "FAIL: the first launch failed"; exit 1; }
grep -q '^\[rank0\]: epoch 1/1 \[#*\] 100%  loss' "$tmp/first" || { cat "$tmp/first"; echo "FAIL: no progress line"; exit 1; }
[ -s "$tmp/ckpt" ] || { echo "FAIL: no checkpoint written"; exit 1; }

"$cohortrun" --standalone --nproc-per-node 2 "$train" "${args[@]}" --epochs 2 --resume >"$tmp/second" 2>&1 || {
  cat "$tmp/second"; echo "FAIL: the resumed launch failed"; exit 1; }
grep -q "resumed from $tmp/ckpt after epoch 1" "$tmp/second" || { cat "$tmp/second"; echo "FAIL: did not resume"; exit 1; }
if grep -q 'epoch 1/2' "$tmp/second"; then cat "$tmp/second"; echo "FAIL: epoch 1 ran again"; exit 1; fi
accuracy="$(sed -n 's/.*test accuracy: \([0-9.]*\)%.*/\1/p' "$tmp/second")"
[ -n "$accuracy" ] || { cat "$tmp/second"; echo "FAIL: no final accuracy"; exit 1; }
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$accuracy') > 95 else 1)" || {
  cat "$tmp/second"; echo "FAIL: test accuracy $accuracy% is not above 95%"; exit 1; }
echo "PASS: resumed after epoch 1, test accuracy $accuracy%"
