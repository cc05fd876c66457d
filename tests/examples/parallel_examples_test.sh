#!/usr/bin/env bash
# The tensor parallel and pipeline examples end to end under cohortrun:
# train_tp at 2 and 4 ranks (held-out accuracy above 95% at 2), and
# train_pipeline with GPipe at 2 stages and 1F1B at 4 (the first stage
# then holds only the Flatten). Each program exits 1 when its loss did not
# halve or strayed more than 1e-3 from the single-process model's; here,
# each must also have printed its summary.
#
#   parallel_examples_test.sh COHORTRUN TRAIN_TP TRAIN_PIPELINE
set -euo pipefail
cohortrun="$1"
tp="$2"
pp="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1

run() {  # NAME NPROC PROGRAM ARGS...
  local name="$1" nproc="$2"
  shift 2
  "$cohortrun" --standalone --nproc-per-node "$nproc" "$@" >"$tmp/$name" 2>&1 || {
    cat "$tmp/$name"; echo "FAIL: $name failed"; exit 1; }
}
run tp2 2 "$tp"
run tp4 4 "$tp" --steps 60
run gpipe2 2 "$pp" --schedule gpipe --steps 60
run 1f1b4 4 "$pp" --schedule 1f1b --steps 60
grep -q "tensor parallel over 2 ranks: .*largest gap" "$tmp/tp2" || { cat "$tmp/tp2"; echo "FAIL: no summary"; exit 1; }
grep -q "tensor parallel over 4 ranks: .*largest gap" "$tmp/tp4" || { cat "$tmp/tp4"; echo "FAIL: no summary"; exit 1; }
grep -q "gpipe over 2 stages, 8 microbatches: .*largest gap" "$tmp/gpipe2" || { cat "$tmp/gpipe2"; echo "FAIL: no summary"; exit 1; }
grep -q "1f1b over 4 stages, 8 microbatches: .*largest gap" "$tmp/1f1b4" || { cat "$tmp/1f1b4"; echo "FAIL: no summary"; exit 1; }
accuracy="$(sed -n 's/.*held-out accuracy \([0-9.]*\)%.*/\1/p' "$tmp/tp2")"
/usr/bin/python3 -c "import sys; sys.exit(0 if float('${accuracy:-0}') > 95 else 1)" || {
  cat "$tmp/tp2"; echo "FAIL: held-out accuracy '$accuracy'% is not above 95%"; exit 1; }
echo "PASS: $(grep -ho '\(tensor parallel\|gpipe\|1f1b\) over .*' "$tmp"/* | tr '\n' ';')"
