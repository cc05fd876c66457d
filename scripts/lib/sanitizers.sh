# Shared by scripts/test and scripts/sanitizers: the core test suite (ctest
# label "core") built with AddressSanitizer + UndefinedBehaviorSanitizer
# into build-asan/, and with ThreadSanitizer into build-tsan/. Source it
# after common.sh; docs/sanitizers.md says what the trees cover and why.

# COHORT_SANITIZER_TREES: the trees, each "name:COHORT_SANITIZE value".
COHORT_SANITIZER_TREES=(asan:address,undefined tsan:thread)

# build_sanitizer_tree NAME configures (once) and builds build-NAME/: the
# library, the tools and the core test programs, without libtorch, MPI
# and NCCL, with warnings as errors, in unity files of up to 16 sources
# (half the build time of one file a unit: headers and templates are
# compiled once a unit, and the instrumentation once a template).
build_sanitizer_tree() {
  local name="$1" sanitize="" tree
  for tree in "${COHORT_SANITIZER_TREES[@]}"; do
    [ "${tree%%:*}" = "$name" ] && sanitize="${tree#*:}"
  done
  [ -n "$sanitize" ] || { echo "cohort: no sanitizer tree '$name' (asan or tsan)" >&2; return 1; }
  local dir="$COHORT_ROOT/build-$name"
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S "$COHORT_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCOHORT_SANITIZE="$sanitize" \
      -DCOHORT_WARNINGS_AS_ERRORS=ON -DCOHORT_WITH_TORCH=OFF -DCOHORT_WITH_MPI=OFF -DCOHORT_WITH_NCCL=OFF \
      -DCOHORT_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
      >"$dir.configure.log" 2>&1 || {
      cat "$dir.configure.log" >&2
      return 1
    }
  fi
  cmake --build "$dir" --target core_tests -j "$COHORT_JOBS"
}

# run_sanitizer_tree NAME runs the core suite in build-NAME/ and adds its
# counts to san_total, san_failed and san_skipped.
# Every process of the run (the test programs and what they start) writes
# its sanitizer reports to build-NAME/reports/ instead of stderr: a child
# whose exit status its test does not look at still fails the run. That
# check counts as one more test of the tree.
run_sanitizer_tree() {
  local name="$1"
  local dir="$COHORT_ROOT/build-$name"
  local reports="$dir/reports"
  rm -rf "$reports"
  mkdir -p "$reports"
  # Stop at the first finding; ASan also checks for leaks at exit, stack
  # use after return and initialisation order; TSan prints both stacks of
  # a lock-order inversion (its suppressions: libstdc++'s, each explained
  # in the file). The caller's own options come last and win.
  local asan="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1"
  asan+=":check_initialization_order=1:strict_init_order=1:log_path=$reports/asan"
  local ubsan="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
  local tsan="halt_on_error=1:second_deadlock_stack=1:log_path=$reports/tsan"
  tsan+=":suppressions=$COHORT_ROOT/tests/tsan_suppressions.txt"
  # In both trees the dtype x op x size product of the matrix is left out
  # at 5 and 8 ranks (two thirds of the TSan run, a third of the ASan one):
  # neither the threads' interleavings nor the buffers' sizes and offsets
  # depend on the dtype or the op, the product runs at 1 to 4 ranks, and
  # every other check of the matrix runs at 5 and 8 ranks.
  local exclude='EveryDtypeOpAndSize.*_P[58]_'
  # The algorithm axis of the matrix runs at 2 to 5 ranks here (powers of
  # two and ranks that fold in and out); from 6 ranks on only in build/:
  # the same code paths, at 6.3 minutes of the ASan run for all 150 cases.
  exclude+='|AlgorithmMatrix[.]Check/[a-z_]*_P([6-9]|1[0-9])( |$)'
  # The columns matrix (hierarchical collectives over pretend hosts) at 10
  # and 12 ranks runs only in build/: 2 and 3 hosts of 5 or 6, the same
  # even layouts as at 4 and 6 ranks with longer columns: 14 cases of
  # 7-61 s, 464 s of test time, about 4 minutes of the ASan run at -j2
  # (2026-12-07). The uneven layouts (7 ranks: hosts of 4 and 3; 9: three
  # of 3), where a column's buffers end at odd offsets, stay.
  exclude+='|ColumnsMatrix[.]Check/[a-z_]*_P1[0-9]_[0-9]+_a_host'
  # Also left out under TSan, which looks for races between the ranks'
  # threads: DesyncTest's pass over the whole matrix (the fingerprint
  # exchange's threads are the same in its smaller tests); the product at
  # one rank (no peer thread to race with); and the algorithm axis at 2 and
  # 5 ranks, leaving 3 (odd: a rank folds in and out) and 4 (a power of
  # two), where every algorithm's threads meet as they do at 2 and 5. The
  # three were a fifth of the TSan run.
  if [ "$name" = tsan ]; then
    exclude+='|EveryCollectiveOfTheMatrixPassesTheCheck'
    exclude+='|EveryDtypeOpAndSize.*_P1_'
    exclude+='|AlgorithmMatrix[.]Check/[a-z_]*_P[25]( |$)'
    # The columns matrix (hierarchical all_gather, reduce_scatter and
    # all_reduce) at 4 and 6 ranks only: 2 and 3 hosts of 2, where every
    # column's and leader's threads meet as they do at more. From 7 ranks
    # on (uneven hosts, 3 a host, 10 and 12 ranks) it runs in build/ and
    # build-asan/; under TSan those 25 cases took 20-240 s each, 23 minutes
    # of the fresh-clone CI at -j2 (2026-12-06).
    exclude+='|ColumnsMatrix[.]Check/[a-z_]*_P([7-9]|1[0-9])_[0-9]+_a_host'
  fi

  echo "cohort: the core suite under $name (build-$name/)"
  # The kill test's 64 MiB runs: 3 per transport here (20 and 5 in build/).
  TIMEFORMAT="cohort: $name: its tests ran in %0R s, %0U s user + %0S s system CPU"
  time (cd "$dir" && COHORT_KILL_REPEATS="${COHORT_KILL_REPEATS:-3}" ASAN_OPTIONS="$asan:${ASAN_OPTIONS:-}" UBSAN_OPTIONS="$ubsan:${UBSAN_OPTIONS:-}" \
    TSAN_OPTIONS="$tsan:${TSAN_OPTIONS:-}" ctest -L core -E "$exclude" --output-on-failure \
    -j "$COHORT_TEST_JOBS" --timeout 300) 2>&1 | tee "$dir/ctest.log"
  count_ctest_log "$dir/ctest.log"
  san_total=$((san_total + ctest_total + 1))
  san_failed=$((san_failed + ctest_failed))
  san_skipped=$((san_skipped + ctest_skipped))
  if compgen -G "$reports/*" >/dev/null; then
    echo "cohort: $name reports (build-$name/reports/):"
    local f
    for f in "$reports"/*; do
      echo "--- $f"
      head -80 "$f"
    done
    san_failed=$((san_failed + 1))
  else
    echo "cohort: $name: no sanitizer report from any process"
  fi
}

# run_sanitizers [NAME...] builds and runs the trees named (every tree
# without arguments) and sets san_total, san_failed and san_skipped; a tree
# that does not build counts as one failed test. It prints how long each
# build and run took.
run_sanitizers() {
  san_total=0 san_failed=0 san_skipped=0
  local names=("$@") tree name start
  if [ ${#names[@]} -eq 0 ]; then
    for tree in "${COHORT_SANITIZER_TREES[@]}"; do names+=("${tree%%:*}"); done
  fi
  for name in "${names[@]}"; do
    # Built in the background already when scripts/test started it so
    # (scripts/lib/side_builds.sh): the build below then has nothing to do,
    # or repeats a failure where it shows.
    if [ -n "${side_builds_pid:-}" ]; then await_side_build "$name"; fi
    start=$SECONDS
    if ! build_sanitizer_tree "$name"; then
      echo "cohort: the $name tree did not build"
      san_total=$((san_total + 1)) san_failed=$((san_failed + 1))
      continue
    fi
    echo "cohort: $name: built in $((SECONDS - start)) s"
    start=$SECONDS
    run_sanitizer_tree "$name"
    echo "cohort: $name: ran in $((SECONDS - start)) s"
  done
}
