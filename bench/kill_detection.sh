#!/usr/bin/env bash
# kill_detection: how fast every survivor learns that a rank died. Runs the
# failure test's kill loop many times (default 50 per transport): 4 ranks
# doing 64 MiB all_reduces, one of them (each in turn) killed with SIGKILL
# in the middle of one; each survivor's NetworkError is timed from the
# kill (wall clock). Prints median, p90 and max over every survivor, for
# shared memory (one host) and for TCP (COHORT_SHM=off).
#
#   bench/kill_detection.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build="${1:-build}"
runs="${2:-50}"
test_binary="$build/tests/process_group_process_test"
[ -x "$test_binary" ] || { echo "kill_detection: $test_binary not built" >&2; exit 1; }
COHORT_KILL_REPEATS="$runs" "$test_binary" \
  --gtest_filter='ProcessGroupFailures.KillDuring64MiB*' 2>&1 |
  grep -E "kill detection|^\[  FAILED|: Failure" || true
