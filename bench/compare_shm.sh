#!/usr/bin/env bash
# compare_shm.sh: cohort on one host (shared memory) side by side with Open
# MPI 4.1 (bench/mpi_bench under mpirun) and libtorch's Gloo
# (bench/gloo_bench, all_reduce only), in one run: the same sizes, world
# sizes and iteration counts, each repeated REPS times, alternating, so
# that all see the same machine load. Writes a markdown table (medians) and
# a PNG plot of all_reduce busbw against size (gnuplot) into OUT_DIR, and
# prints the table. cohort's all_reduce busbw is also given as a fraction of
# one thread's memcpy bandwidth (bench/memcpy_bench) measured in the run.
#
#   bench/compare_shm.sh [REPS=3] [OUT_DIR=bench/results]
#
# Needs build/ with tools/cohort-bench, bench/mpi_bench, bench/gloo_bench
# and bench/memcpy_bench (scripts/test builds them), mpirun and gnuplot.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
ensure_packages openmpi-bin gnuplot-nox
REPS="${1:-3}"
OUT="${2:-bench/results}"
mkdir -p "$OUT"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Small sizes need many iterations to time; large ones few.
SMALL=(-b 4 -e 256K -f 4 -n 2000 -w 50)
LARGE=(-b 1M -e 64M -f 4 -n 20 -w 3)
run_all() {  # rep
  local rep="$1" p c sweep
  for p in 2 4; do
    for c in all_reduce all_gather reduce_scatter broadcast reduce all_to_all barrier; do
      for sweep in SMALL LARGE; do
        [ "$c" = barrier ] && [ "$sweep" = LARGE ] && continue
        local -n args="$sweep"
        build/tools/cohort-bench "$c" "${args[@]}" --spawn "$p" >"$raw/cohort.$c.$p.$sweep.$rep"
        mpirun -np "$p" --oversubscribe build/bench/mpi_bench "$c" "${args[@]}" \
          >"$raw/mpi.$c.$p.$sweep.$rep" 2>/dev/null
        if [ "$c" = all_reduce ]; then
          build/bench/gloo_bench all_reduce "${args[@]}" --spawn "$p" >"$raw/gloo.$c.$p.$sweep.$rep" 2>/dev/null
        fi
      done
    done
  done
  build/bench/memcpy_bench >"$raw/memcpy.$rep"
}
for ((i = 0; i < REPS; i++)); do run_all "$i"; done

/usr/bin/python3 - "$raw" "$OUT" "$REPS" <<'PY'
import glob, os, statistics, sys
raw, out, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])

def load(impl, coll, p):
    runs = {}
    for f in glob.glob(f"{raw}/{impl}.{coll}.{p}.*"):
        for line in open(f):
            cols = line.split()
            if not line.startswith("#") and len(cols) >= 8 and cols[0].isdigit():
                runs.setdefault(int(cols[0]), []).append((float(cols[5]), float(cols[7])))
    return {s: (statistics.median(t for t, _ in v), statistics.median(b for _, b in v)) for s, v in runs.items()}

memcpy = statistics.median(float(open(f).read()) for f in glob.glob(f"{raw}/memcpy.*"))
lines = [f"# cohort (shared memory) vs Open MPI vs Gloo, one host, median of {reps} runs",
         "", f"memcpy, one thread, 64 MiB: {memcpy:.2f} GB/s", ""]
def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"
colls = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "barrier"]
summary = {}  # (coll, p) -> {size: cohort / mpi}
for coll in colls:
    for p in [2, 4]:
        c, m, g = load("cohort", coll, p), load("mpi", coll, p), load("gloo", coll, p)
        lines += [f"## {coll}, {p} ranks", ""]
        head = "| size (B) | cohort time (us) | mpi time (us) | cohort busbw (GB/s) | mpi busbw (GB/s) | cohort / mpi"
        sep = "|---|---|---|---|---|---"
        if g:
            head += " | gloo time (us) | gloo busbw (GB/s) | cohort / gloo"
            sep += "|---|---|---"
        if coll == "all_reduce":
            head += " | cohort busbw / memcpy"
            sep += "|---"
        lines += [head + " |", sep + "|"]
        for s in sorted(c):
            ct, cb = c[s]
            mt, mb = m.get(s, (None, None))
            # busbw ratio where there is data; time ratio (speed-up) for latency rows
            ratio = (cb / mb if mb else (mt / ct if mt else None)) if s else (mt / ct if mt else None)
            summary.setdefault((coll, p), {})[s] = ratio
            row = f"| {s} | {ct:.2f} | {fmt(mt, 2)} | {cb:.3f} | {fmt(mb)} | {fmt(ratio, 2)}"
            if g:
                gt, gb = g.get(s, (None, None))
                row += f" | {fmt(gt, 2)} | {fmt(gb)} | {fmt(gt / ct if gt else None, 2)}"
            if coll == "all_reduce":
                row += f" | {cb / memcpy:.2f}"
            lines.append(row + " |")
        lines.append("")
        if coll == "all_reduce":
            with open(f"{out}/all_reduce_p{p}.dat", "w") as d:
                for s in sorted(c):
                    d.write(f"{s} {c[s][1]} {m.get(s, (0, 0))[1]} {g.get(s, (0, 0))[1]}\n")
lines.append("cohort / mpi and cohort / gloo: ratio of busbw, or of time (theirs / ours) where no data moves.")
# The summary: cohort / mpi for every collective and world size by size
# (the rows of all_gather, reduce_scatter and all_to_all at 4 ranks start
# at 16 B: a size is rounded to a multiple of the ranks' elements).
keys = [k for k in ((c, p) for c in colls for p in [2, 4]) if k in summary and k[0] != "barrier"]
sizes = sorted({s for k in keys for s in summary[k]})
lines += ["", "## Summary: cohort / Open MPI (busbw; time where no data moves)", "",
          "| size (B) | " + " | ".join(f"{c}, {p}" for c, p in keys) + " |",
          "|---|" + "---|" * len(keys)]
for s in sizes:
    lines.append(f"| {s} | " + " | ".join(fmt(summary[k].get(s), 2) for k in keys) + " |")
bar = summary.get(("barrier", 2), {}), summary.get(("barrier", 4), {})
lines += ["", "barrier, time of Open MPI over cohort's: 2 ranks " + fmt(bar[0].get(0), 2) +
          ", 4 ranks " + fmt(bar[1].get(0), 2)]
open(f"{out}/compare_shm.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY

gnuplot <<GP
set terminal pngcairo noenhanced size 1100,450 font ",10"
set output "$OUT/all_reduce_shm.png"
set multiplot layout 1,2 title "all\\_reduce busbw on one host (float32 SUM; median of $REPS runs)"
set logscale x 2
set format x "%.0b%B"
set xlabel "size (bytes)"
set ylabel "busbw (GB/s)"
set key top left
set grid
do for [p in "2 4"] {
  set title p." ranks"
  plot "$OUT/all_reduce_p".p.".dat" using 1:2 with linespoints title "cohort (shm)", \
       "" using 1:3 with linespoints title "Open MPI 4.1", \
       "" using 1:4 with linespoints title "Gloo (torch 2.13)"
}
unset multiplot
GP
echo "wrote $OUT/compare_shm.md and $OUT/all_reduce_shm.png"
