#!/usr/bin/env bash
# compare_latency.sh: the small-message latency of cohort on one host
# (shared memory) against raw Open MPI 4.1 (bench/mpi_bench under mpirun):
# 4-byte all_reduce and barrier at 2 and 4 ranks. Sub-microsecond times
# move by 2x from one minute to the next on these shared machines, so each
# repetition runs every command back to back (cohort builds, then Open
# MPI), and the table gives the median time and the median of the
# per-repetition ratios: both sides of a ratio saw the same machine state.
#
#   bench/compare_latency.sh [REPS=9] [COHORT_BENCH...]
#
# COHORT_BENCH: cohort-bench binaries to compare (default
# build/tools/cohort-bench); give an older build too to measure a change.
#
# The machines here also switch between a fast and a slow state (the
# bare exchange of a word between two cores takes ~40 or ~240 ns, and
# every time here follows it). Each row is therefore framed by two runs
# of build/bench/sync_patterns: a row whose two frames agree is also
# counted in a table of its state, so that a change is compared within
# one state and not across a switch.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
ensure_packages openmpi-bin
REPS="${1:-9}"
shift || true
BENCHES=("$@")
[ ${#BENCHES[@]} -gt 0 ] || BENCHES=(build/tools/cohort-bench)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
time_of() { grep -E '^ +[0-9]' | awk '{print $6}'; }
# exchange_ns: the bare 2-rank mailbox exchange now, in ns (its last column).
exchange_ns() { build/bench/sync_patterns 100000 1 | tail -1 | awk '{print $NF}'; }
for ((r = 0; r < REPS; r++)); do
  for p in 2 4; do
    for c in all_reduce barrier; do
      args=(-n 100000 -w 1000)
      [ "$c" = all_reduce ] && args=(-b 4 -e 4 "${args[@]}")
      [ "$p" = 4 ] && args=("${args[@]/100000/20000}")
      row="$(exchange_ns) "
      for b in "${BENCHES[@]}"; do row+="$("$b" "$c" "${args[@]}" --spawn "$p" | time_of) "; done
      row+="$(mpirun -np "$p" --oversubscribe build/bench/mpi_bench "$c" "${args[@]}" 2>/dev/null | time_of) "
      row+="$(exchange_ns)"
      echo "$row" >>"$raw/$c.$p"
    done
  done
done
/usr/bin/python3 - "$raw" "$REPS" "${BENCHES[@]}" <<'PY'
import statistics, sys
raw, reps, benches = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
n = len(benches) + 1  # the builds, then Open MPI
# Each row: exchange ns before, the n times, exchange ns after.
rows = {}
for c in ["all_reduce", "barrier"]:
    for p in [2, 4]:
        rows[c, p] = [list(map(float, l.split())) for l in open(f"{raw}/{c}.{p}") if len(l.split()) == n + 2]

def state(r):
    """fast or slow when both frames of the row say so, else None."""
    if max(r[0], r[-1]) < 100: return "fast"
    if min(r[0], r[-1]) >= 150: return "slow"
    return None

def table(title, keep):
    print(title + "\n")
    head = "| collective | ranks | rows | " + " | ".join(f"{b} (us)" for b in benches) + " | Open MPI (us) | " + \
           " | ".join(f"{b} / Open MPI" for b in benches) + " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for (c, p), all_rows in rows.items():
        kept = [r[1:-1] for r in all_rows if keep(r)]
        if not kept: continue
        med = [statistics.median(r[i] for r in kept) for i in range(n)]
        ratio = [statistics.median(r[i] / r[-1] for r in kept) for i in range(n - 1)]
        print(f"| {c} | {p} | {len(kept)} | " + " | ".join(f"{m:.3f}" for m in med) + " | " +
              " | ".join(f"{x:.2f}" for x in ratio) + " |")
    print()

table(f"# 4-byte latency on one host, median of {reps} repetitions (times in us)", lambda r: True)
for s in ["fast", "slow"]:
    if any(state(r) == s for rs in rows.values() for r in rs):
        table(f"## only the rows run in the machine's {s} state (bare exchange "
              f"{'under 100' if s == 'fast' else 'from 150'} ns before and after)", lambda r, s=s: state(r) == s)
PY
