# Shared by scripts/test and scripts/demo: installing what is missing and
# building into build/. Source it; do not run it.

COHORT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Parallel jobs for builds and for ctest: every core unless the caller says
# otherwise (on a machine shared with other builds, COHORT_JOBS=1).
COHORT_JOBS="${COHORT_JOBS:-$(nproc)}"
COHORT_TEST_JOBS="${COHORT_TEST_JOBS:-$(nproc)}"

# The Debian packages a build with every feature needs (python3-torch: the
# sampler tests compare with torch's own DistributedSampler).
COHORT_PACKAGES=(
  cmake ninja-build g++ pkg-config
  libssl-dev libgtest-dev libbenchmark-dev
  clang libclang-rt-14-dev
  libtorch-dev libgloo-dev libopenblas0-pthread
  libopenmpi-dev openmpi-bin
  python3 python3-torch iproute2
  libcli11-dev etcd-server etcd-client
)

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

# build_cohort configures (once) and builds build/ with warnings as errors.
build_cohort() {
  local dir="$COHORT_ROOT/build"
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S "$COHORT_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCOHORT_WARNINGS_AS_ERRORS=ON >"$dir.configure.log" 2>&1 || {
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
