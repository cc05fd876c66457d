# Shared by the bench/compare_*.sh scripts that launch their programs with
# cohortrun. Source it after setting `out` (the script's scratch folder).

# run_launched NAME PATTERN LABEL NPROC PROGRAM [ARGS...] runs PROGRAM
# under cohortrun with NPROC ranks on this host and appends the lines of
# its output that match PATTERN (grep -E), each prefixed with LABEL and a
# space when LABEL is not empty, to $out/results. When no line matches it
# prints the run's last lines on stderr, and when the job failed after its
# result it says so: a comparison must not lose a failed run silently.
# Environment set before the call (MALLOC_MMAP_THRESHOLD_=...) reaches the
# ranks.
run_launched() {
  local name="$1" pattern="$2" label="$3" nproc="$4" rc=0 lines
  shift 4
  build/tools/cohortrun --standalone --nproc-per-node "$nproc" "$@" >"$out/run" 2>&1 || rc=$?
  lines="$(grep -oE "$pattern" "$out/run" || true)"
  if [ -z "$lines" ]; then
    echo "$name: '$*' at $nproc ranks gave no result; its last lines:" >&2
    tail -5 "$out/run" >&2
    return 0
  fi
  [ -n "$label" ] && lines="$(sed "s/^/$label /" <<<"$lines")"
  echo "$lines" >>"$out/results"
  if [ "$rc" -ne 0 ]; then
    echo "$name: '$*' at $nproc ranks exited $rc after its result:" \
      "$(grep -m1 -E "terminate|Error" "$out/run" || true)" >&2
  fi
}
