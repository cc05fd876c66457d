#!/usr/bin/env bash
# compare_rpc.sh: cohort's RPC (build/bench/rpc_bench) against torch 2.13's
# torch.distributed.rpc, TensorPipe agent (bench/python/rpc_bench.py),
# between two processes on this host, each launched by cohortrun,
# alternating, REPS times. Prints a markdown table of medians and
# cohort's advantage (time ratio for round trips, throughput ratio for
# echoes and async calls) beside issue 26's targets.
#
#   bench/compare_rpc.sh [REPS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
source bench/lib/launch.sh
export OMP_NUM_THREADS=1
run_one() { run_launched compare_rpc "rpc_bench (cohort|torch) .*" "" 2 "$@"; }
for ((rep = 0; rep < REPS; rep++)); do
  run_one build/bench/rpc_bench
  run_one "${COHORT_PYTHON:-python3}" bench/python/rpc_bench.py
done
# One thread's memcpy of 16 MiB bounds the 16 MiB echo (each way copies it).
build/bench/memcpy_bench $((16 << 20)) 15 >"$out/memcpy"
"${COHORT_PYTHON:-python3}" - "$out/results" "$REPS" "$(cat "$out/memcpy")" <<'PY'
import re, statistics, sys
runs = {"cohort": [], "torch": []}
for line in open(sys.argv[1]):
    m = re.match(r"rpc_bench (cohort|torch) (.*)", line.strip())
    if m:
        runs[m.group(1)].append(dict(kv.split("=") for kv in m.group(2).split()))
def med(impl, key):
    v = [float(r[key]) for r in runs[impl]]
    return statistics.median(v) if v else float("nan")
rows = [("no-op rpc_sync round trip (us)", "noop_us", "time", 20),
        ("echo 4 KiB (us)", "echo4k_us", "time", None),
        ("echo 1 MiB (GB/s both ways)", "echo1m_gbps", "rate", 3),
        ("echo 16 MiB (GB/s both ways)", "echo16m_gbps", "rate", 3),
        ("rpc_async calls per second", "async_calls_per_s", "rate", 10)]
print(f"# rpc: cohort vs torch's TensorPipe agent, 2 processes on one host, medians of {sys.argv[2]} runs\n")
print("| measure | cohort | torch (TensorPipe) | cohort's advantage | target |")
print("|---|---|---|---|---|")
for name, key, kind, target in rows:
    c, t = med("cohort", key), med("torch", key)
    adv = t / c if kind == "time" else c / t
    goal = f"{target}x" + (" met" if adv >= target else " not met") if target else "-"
    print(f"| {name} | {c:.2f} | {t:.2f} | {adv:.1f}x | {goal} |")
print(f"\none thread's memcpy of 16 MiB this run: {float(sys.argv[3]):.2f} GB/s "
      f"(a 16 MiB echo copies 16 MiB each way: at most that rate, both ways counted)")
PY
