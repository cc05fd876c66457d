# Shared by scripts/test and scripts/demo: installing what is missing and
# building into build/. Source it; do not run it.

COHORT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Parallel jobs for builds and for ctest: every core unless the caller says
# otherwise (on a machine shared with other builds, COHORT_JOBS=1).
COHORT_JOBS="${COHORT_JOBS:-$(nproc)}"
COHORT_TEST_JOBS="${COHORT_TEST_JOBS:-$(nproc)}"

# The Debian packages a build with every feature needs. torch is not among
# them: it comes from pip (ensure_python_packages), and Debian's libtorch
# 1.13 is no longer the project's torch.
COHORT_PACKAGES=(
  cmake ninja-build g++ pkg-config
  libssl-dev libgtest-dev libbenchmark-dev
  clang libclang-rt-14-dev
  libopenmpi-dev openmpi-bin
  python3 python3-dev iproute2
  libcli11-dev nlohmann-json3-dev etcd-server etcd-client
)

# The Python that brings torch: COHORT_PYTHON, default python3 on PATH. Its
# pip packages: torch pinned exactly (the CPU build; a looser spec pulls a
# CUDA build of several GB), pytest, and NCCL's headers and library for
# building the NCCL backend (no GPU is needed to build it).
COHORT_PYTHON="${COHORT_PYTHON:-python3}"
# torch's own test suite needs expecttest (scripts/torch_suite); the
# framework clients the tests run over cohort (tests/python/test_clients.py)
# are pinned to versions that keep torch 2.13.0.
COHORT_PYTHON_PACKAGES=(torch==2.13.0 pytest nvidia-nccl-cu13==2.32.3 expecttest==0.3.0
  pytorch-lightning==2.6.6 transformers==5.23.0 accelerate==1.15.0)

# ensure_python_packages installs the pip packages COHORT_PYTHON lacks;
# silent when it has them all.
ensure_python_packages() {
  if ! command -v "$COHORT_PYTHON" >/dev/null; then
    echo "cohort: no '$COHORT_PYTHON' on PATH (set COHORT_PYTHON to a Python 3.9+ with pip)" >&2
    return 1
  fi
  local missing
  missing="$("$COHORT_PYTHON" - "$@" <<'PY'
import importlib.metadata as md, sys
for spec in sys.argv[1:]:
    name, _, version = spec.partition("==")
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        have = None
    # torch's local version (+cpu) is part of what pip installed, not a mismatch.
    if have is None or (version and have.split("+")[0] != version):
        print(spec)
PY
)" || return 1
  [ -z "$missing" ] && return 0
  echo "cohort: installing missing Python packages into $COHORT_PYTHON: $(echo $missing)"
  # shellcheck disable=SC2086
  "$COHORT_PYTHON" -m pip install -q $missing || {
    echo "cohort: '$COHORT_PYTHON -m pip install $(echo $missing)' failed; a Python whose packages" \
      "pip may change (a virtual environment, or pyenv's) named by COHORT_PYTHON fixes it" >&2
    return 1
  }
}

# ensure_packages installs the packages that are missing; silent when none is.
ensure_packages() {
  local missing=()
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "cohort: installing missing packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      echo "cohort: need root to install: ${missing[*]}" >&2
      return 1
    fi
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# build_cohort configures (once) and builds build/ with warnings as errors,
# in unity files of up to 16 sources: a fresh build takes 12 minutes here
# instead of 17 (each header and template compiled once a unit). After
# editing one file its unit recompiles; a tree for that kind of work:
# `cmake -DCMAKE_UNITY_BUILD=OFF build` (libcohort_torch keeps its own
# groups: COHORT_TORCH_UNITY). Debug information is line tables only
# (-g1): perf, backtraces and sanitizer-style stacks keep files and lines,
# and the full -g cost a fifth of the compile (a libtorch program's unit:
# 18.9 s of CPU against 15.0); for a debugger's view of local variables,
# `cmake -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG" build`.
build_cohort() {
  local dir="$COHORT_ROOT/build"
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S "$COHORT_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
      -DCOHORT_WARNINGS_AS_ERRORS=ON -DCOHORT_PYTHON="$COHORT_PYTHON" \
      -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >"$dir.configure.log" 2>&1 || {
      cat "$dir.configure.log" >&2
      return 1
    }
    grep "^-- cohort:" "$dir.configure.log" || true
  fi
  cmake --build "$dir" -j "$COHORT_JOBS"
}

# count_ctest_log LOG sets ctest_total, ctest_failed and ctest_skipped from
# ctest's output in LOG; a log without ctest's summary counts as one failure.
count_ctest_log() {
  local summary
  summary="$(grep -E '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$1" | tail -1)"
  if [ -z "$summary" ]; then
    echo "ctest printed no summary"
    ctest_total=1 ctest_failed=1 ctest_skipped=0
    return
  fi
  ctest_total="$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")"
  ctest_failed="$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$summary")"
  ctest_skipped="$(grep -c '(Skipped)' "$1" || true)"
}

# recap_ctest_failures LOG... prints, for every test a ctest log says
# failed, its name and the last lines of its output. scripts/test calls it
# last: CI keeps only the tail of what a run prints, and a failure in the
# first of three ctest runs would otherwise be out of sight.
recap_ctest_failures() {
  local log name
  for log in "$@"; do
    [ -f "$log" ] || continue
    # ctest's closing list: "<tab>123 - Suite.Name (Failed)".
    grep -E '^[[:space:]]+[0-9]+ - .* \((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception|Not Run|Child aborted|ILLEGAL)' "$log" |
      sed -E 's/^[[:space:]]+[0-9]+ - ([^ ]+) .*/\1/' | while read -r name; do
        echo "=== failed in ${log#"$COHORT_ROOT"/}: $name (its last lines)"
        # The test's status line, then its output up to the next test's line.
        awk -v name="$name" '
          index($0, ": " name " ") && /Test +#/ { on = 1; print; next }
          on && (/^ *[0-9]+\/[0-9]+ Test +#/ || /^ +Start +[0-9]+: / || /tests passed, /) { on = 0 }
          on { print }' "$log" | tail -40
      done
  done
}
