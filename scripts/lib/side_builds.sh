# Used by scripts/test: the trees whose tests run after build/'s (the
# fuzzer's, build-asan/, build-tsan/) build in the background, at idle
# priority, while build/ builds and its tests run. Source it after
# common.sh and sanitizers.sh.
#
# Why: build/'s ctest keeps the 2 cores only about 70% busy (many tests
# wait on processes, sockets and timeouts), its build leaves a core idle in
# its serial stretches, and the ASan run leaves a quarter of the cores. Under SCHED_IDLE a build gets
# only the CPU that nothing else wants, so the tests beside it run as they
# would alone (a waking test preempts the build at once), and every step
# builds what it can in the time the stage before it leaves.

# build_fuzzer builds the store protocol fuzzer with clang's libFuzzer into
# build-fuzz/ (configured once).
build_fuzzer() {
  if [ ! -f build-fuzz/build.ninja ]; then
    CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCOHORT_BUILD_FUZZERS=ON -DCOHORT_BUILD_TESTS=OFF \
      -DCOHORT_BUILD_BENCH=OFF -DCOHORT_WITH_TORCH=OFF -DCOHORT_WITH_MPI=OFF -DCOHORT_WITH_NCCL=OFF \
      >build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; return 1; }
  fi
  cmake --build build-fuzz --target store_protocol_fuzz -j "$COHORT_JOBS"
}

# side_build NAME builds one step: fuzz, or a sanitizer tree (asan, tsan).
side_build() {
  case "$1" in
    fuzz) build_fuzzer ;;
    *) build_sanitizer_tree "$1" ;;
  esac
}

# start_side_builds NAME... builds the steps one after the other in the
# background at idle priority. Each step leaves build-NAME.side.log (its
# output) and, when it ends, build-NAME.side.rc ("<exit status> <seconds>").
side_builds_pid=""
start_side_builds() {
  local name
  for name in "$@"; do rm -f "$COHORT_ROOT/build-$name.side.rc"; done
  (
    cd "$COHORT_ROOT" || exit 1
    # Inherited by every compiler the builds start. Without SCHED_IDLE
    # (chrt missing or refused), the lowest nice is the next best thing.
    chrt --idle -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
    for name in "$@"; do
      start=$SECONDS
      side_build "$name" >"build-$name.side.log" 2>&1
      echo "$? $((SECONDS - start))" >"build-$name.side.rc"
    done
  ) &
  side_builds_pid=$!
  # A run that ends early (a failed build/) takes its side builds with it.
  trap stop_side_builds EXIT
}

# stop_side_builds ends the background builds, compilers included, if they
# still run: only while the process of that number is still this shell's
# child, since a number whose process ended may be another's by now.
stop_side_builds() {
  [ -n "$side_builds_pid" ] || return 0
  local parent
  parent="$(cut -d' ' -f4 /proc/"$side_builds_pid"/stat 2>/dev/null)"
  [ "$parent" = "$$" ] && kill_process_tree "$side_builds_pid"
  return 0
}

kill_process_tree() {
  local child
  for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do kill_process_tree "$child"; done
  kill "$1" 2>/dev/null
}

# await_side_build NAME waits for NAME's step, prints how it went and
# returns its exit status (1 when the background builds ended without it).
# The caller builds again in the foreground after a failure: ninja then
# prints the error where CI shows it.
await_side_build() {
  local name="$1"
  local rc_file="$COHORT_ROOT/build-$name.side.rc" waited=$SECONDS
  while [ ! -f "$rc_file" ] && kill -0 "$side_builds_pid" 2>/dev/null; do sleep 1; done
  if [ ! -f "$rc_file" ]; then
    echo "cohort: $name: the background builds ended before building it"
    return 1
  fi
  local rc seconds
  read -r rc seconds <"$rc_file"
  echo "cohort: $name: built in the background in ${seconds} s (waited $((SECONDS - waited)) s for it;" \
    "log: build-$name.side.log), exit status $rc"
  return "$rc"
}
