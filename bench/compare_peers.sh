#!/usr/bin/env bash
# compare_peers.sh: cohort on one host beside the fastest peers there are
# for CPUs: Open MPI 4.1 (Debian's), Intel MPI and Intel oneCCL (PyPI), and
# libtorch's Gloo (all_reduce only). Every implementation runs the same
# collectives, sizes and iteration counts, REPS times, alternating, so that
# all see the same machine. cohort runs bound (cohort-bench --spawn, whose
# --bind auto gives each rank a core where there is one); Open MPI and Intel
# MPI bind with their own defaults, oneCCL runs over Intel MPI. Writes a
# markdown table of medians, with the best peer and cohort's speed over it
# (above 1: cohort is faster), into OUT_DIR/peers.md and prints it.
#
#   bench/compare_peers.sh [REPS=3] [OUT_DIR=bench/results]
#
# Intel MPI and oneCCL are installed on first use, with exact pins, into a
# folder of their own (COHORT_PEERS_DIR, default build/peers), never into
# the Python that has torch: `pip install --no-deps --prefix`, since
# `--target` drops the wheels' lib/. oneCCL's libccl needs libccl.so.2,
# which only the oneccl wheel carries, and the oneccl wheel's libccl.so.1 is
# its SYCL (GPU) build: oneccl goes in first, oneccl-cpu over it. Then
# bench/mpi_bench.c is built against Intel MPI and bench/ccl_bench.cc
# against oneCCL in that folder.
#
# PEERS_COLLECTIVES (default "all_reduce all_gather reduce_scatter broadcast
# all_to_all"), PEERS_RANKS (default "2 4") narrow a run; a peer's sweep
# that runs past PEERS_TIMEOUT_S (default 120) is cut off and shows "-". Needs build/ with
# tools/cohort-bench, bench/mpi_bench and bench/gloo_bench, and mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
ensure_packages openmpi-bin g++
REPS="${1:-3}"
OUT="${2:-bench/results}"
PEERS="${COHORT_PEERS_DIR:-build/peers}"
COLLECTIVES="${PEERS_COLLECTIVES:-all_reduce all_gather reduce_scatter broadcast all_to_all}"
RANKS="${PEERS_RANKS:-2 4}"
mkdir -p "$OUT" "$PEERS"
PEERS="$(cd "$PEERS" && pwd)"

install_peers() {
  local prefix="$PEERS/prefix"
  [ -x "$prefix/bin/mpiexec.hydra" ] && [ -f "$prefix/include/oneapi/ccl.hpp" ] && return 0
  echo "installing Intel MPI and oneCCL into $prefix" >&2
  "$COHORT_PYTHON" -m pip install -q --no-deps --prefix "$prefix" \
    impi-rt==2021.19.0 impi-devel==2021.19.0 oneccl==2022.2.0
  "$COHORT_PYTHON" -m pip install -q --no-deps --force-reinstall --prefix "$prefix" \
    oneccl-cpu==2022.2.0 oneccl-cpu-devel==2022.2.0
}
install_peers
P="$PEERS/prefix"
if [ ! -x "$PEERS/impi_bench" ] || [ bench/mpi_bench.c -nt "$PEERS/impi_bench" ]; then
  gcc -O2 -o "$PEERS/impi_bench" bench/mpi_bench.c -I"$P/include" -L"$P/lib" -lmpi -Wl,-rpath,"$P/lib"
fi
if [ ! -x "$PEERS/ccl_bench" ] || [ bench/ccl_bench.cc -nt "$PEERS/ccl_bench" ]; then
  # The linker's note that libccl.so.2 "may conflict with libccl.so.1" is
  # how these wheels are built: the CPU libccl.so.1 loads libccl.so.2.
  g++ -O2 -std=c++17 -o "$PEERS/ccl_bench" bench/ccl_bench.cc -I"$P/include" -L"$P/lib" -lccl -lmpi \
    -Wl,-rpath,"$P/lib" 2>&1 | grep -v "may conflict with" || true
fi

raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Intel MPI over shared memory alone, started by fork on loopback; oneCCL
# over it, without its spinning worker thread (which costs 15-40 ms a call
# on 2 cores).
intel_env=(I_MPI_FABRICS=shm I_MPI_HYDRA_BOOTSTRAP=fork I_MPI_HYDRA_IFACE=lo
  CCL_ATL_TRANSPORT=mpi CCL_WORKER_OFFLOAD=0 CCL_KVS_IFACE=lo CCL_LOG_LEVEL=error)
cores="$(nproc)"
# A peer's sweep that runs past this is cut off; its cells show "-".
PEER_TIMEOUT="${PEERS_TIMEOUT_S:-120}"
# Each call's time is the median of -R rounds (bench/mpi_bench.c, -R).
SMALL=(-b 4 -e 256K -f 4 -n 200 -R 9 -w 50)
LARGE=(-b 1M -e 16M -f 4 -n 10 -R 5 -w 3)
run_all() {  # rep
  local rep="$1" p c sweep over
  for p in $RANKS; do
    over=() intel_wait=()
    # Oversubscribed, Intel MPI is told to wait rather than poll.
    [ "$p" -gt "$cores" ] && over=(--oversubscribe) intel_wait=(I_MPI_WAIT_MODE=1)
    for c in $COLLECTIVES; do
      for sweep in SMALL LARGE; do
        local -n args="$sweep"
        local tag="$c.$p.$sweep.$rep"
        build/tools/cohort-bench "$c" "${args[@]}" -c 0 --spawn "$p" >"$raw/cohort.$tag" 2>/dev/null
        mpirun -np "$p" "${over[@]}" build/bench/mpi_bench "$c" "${args[@]}" >"$raw/openmpi.$tag" 2>/dev/null
        timeout "$PEER_TIMEOUT" env "${intel_env[@]}" "${intel_wait[@]}" "$P/bin/mpiexec.hydra" -n "$p" \
          "$PEERS/impi_bench" "$c" "${args[@]}" >"$raw/intelmpi.$tag" 2>/dev/null || true
        # oneCCL's progress loops spin whatever it is told (CCL_YIELD,
        # I_MPI_WAIT_MODE): with more ranks than cores one sweep ran past a
        # minute, so it runs only where each rank has a core.
        if [ "$p" -le "$cores" ]; then
          timeout "$PEER_TIMEOUT" env "${intel_env[@]}" "$P/bin/mpiexec.hydra" -n "$p" \
            "$PEERS/ccl_bench" "$c" "${args[@]}" >"$raw/oneccl.$tag" 2>/dev/null || true
        fi
        if [ "$c" = all_reduce ]; then
          # gloo_bench (bench/python/torch_collectives.py) has no -R: its
          # time is the mean of the -n calls.
          local gloo_args=() skip=0 a
          for a in "${args[@]}"; do
            if [ "$skip" = 1 ]; then skip=0; continue; fi
            if [ "$a" = -R ]; then skip=1; continue; fi
            gloo_args+=("$a")
          done
          build/bench/gloo_bench all_reduce "${gloo_args[@]}" --spawn "$p" >"$raw/gloo.$tag" 2>/dev/null || true
        fi
      done
    done
  done
}
for ((i = 0; i < REPS; i++)); do
  run_all "$i"
  echo "repetition $((i + 1)) of $REPS done" >&2
done

/usr/bin/python3 - "$raw" "$OUT" "$REPS" "$COLLECTIVES" "$RANKS" <<'PY'
import os, sys
sys.path.insert(0, "bench/lib")
from bench_tables import load_medians, size_text
raw, out, reps, colls, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), sys.argv[5].split()
peers = ["openmpi", "intelmpi", "oneccl", "gloo"]

def load(impl, coll, p):
    return load_medians(f"{raw}/{impl}.{coll}.{p}.*")


lines = [f"# cohort vs Open MPI, Intel MPI, oneCCL and Gloo, one host ({os.cpu_count()} CPUs), "
         f"median of {reps} runs", "",
         "Time per call in us; best peer: the fastest of the others; cohort's speed over it above 1 "
         "means cohort is faster.", ""]
for coll in colls:
    for p in ranks:
        c = load("cohort", coll, p)
        others = {q: load(q, coll, p) for q in peers}
        shown = [q for q in peers if others[q]]
        lines += [f"## {coll}, {p} ranks", "",
                  "| size | cohort | " + " | ".join(shown) + " | best peer | best peer / cohort |",
                  "|---|---|" + "---|" * len(shown) + "---|---|"]
        for size in sorted(c):
            times = {q: others[q].get(size) for q in shown}
            have = {q: t for q, t in times.items() if t is not None}
            best = min(have, key=have.get) if have else None
            ratio = have[best] / c[size] if best and c[size] > 0 else None
            lines.append(f"| {size_text(size)} | {c[size]:.2f} | " +
                         " | ".join("-" if times[q] is None else f"{times[q]:.2f}" for q in shown) +
                         f" | {best or '-'} | {'-' if ratio is None else f'{ratio:.2f}'} |")
        lines.append("")
text = "\n".join(lines)
open(os.path.join(out, "peers.md"), "w").write(text)
print(text)
PY
