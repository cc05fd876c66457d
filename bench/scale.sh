#!/usr/bin/env bash
# scale.sh: cohort at many ranks against Open MPI's own decision rules and
# Gloo. P processes on this machine, every pair over TCP (COHORT_SHM=off:
# each rank its own host; Open MPI with --mca btl tcp,self), and pretend
# hosts of 4 ranks sharing memory (COHORT_SHM_RANKS_PER_HOST=4: the
# hierarchical path), one implementation after the other on the same
# machine, REPS times alternating. All ranks share the machine's cores, so
# read the ratios, not the times. Writes OUT_DIR/scale.md (a table per
# collective and P: time per call in us and cohort over Open MPI, below 1
# means cohort is faster) and, with gnuplot, OUT_DIR/scale_<collective>.png
# (time against P per size).
#
#   bench/scale.sh [REPS=1] [OUT_DIR=bench/results]
#
# SCALE_RANKS (default "8 16 32"), SCALE_HOSTS4 (pretend-host layouts, ranks
# 4 a host; default "32"), SCALE_COLLECTIVES (default "all_reduce all_gather
# reduce_scatter broadcast all_to_all"), SCALE_MAX (largest size, default
# 256K; sizes from 1M run where P <= SCALE_LARGE_RANKS, default 16).
# SCALE_BIND (default auto) is how cohort-bench binds its ranks (--bind;
# auto puts neighbours on one core where they outnumber the cores).
# SCALE_BASELINE_ALGO, when set, runs cohort a second time with that
# COHORT_ALGO (column "forced"): e.g. the table before the cost model,
# "all_gather=ring,reduce_scatter=ring,broadcast:0-32K:binomial_tree,broadcast:32K-:chain".
# SCALE_BASELINE_ENV (VAR=value words) does the same with other knobs, e.g.
# "COHORT_COST_RANKS_PER_CPU=1": the table that gives each rank a CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
ensure_packages openmpi-bin
REPS="${1:-1}"
OUT="${2:-bench/results}"
RANKS="${SCALE_RANKS:-8 16 32}"
HOSTS4="${SCALE_HOSTS4:-32}"
COLLECTIVES="${SCALE_COLLECTIVES:-all_reduce all_gather reduce_scatter broadcast all_to_all}"
MAX="${SCALE_MAX:-256K}"
LARGE_RANKS="${SCALE_LARGE_RANKS:-16}"
BIND="${SCALE_BIND:-auto}"
mkdir -p "$OUT"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TIMEOUT="${SCALE_TIMEOUT_S:-300}"
SMALL=(-b 4 -e "$MAX" -f 8 -n 20 -R 3 -w 3)
LARGE=(-b 1M -e 4M -f 4 -n 4 -R 3 -w 1)
# failed: say on stderr that a run failed, with the end of its stderr.
failed() {  # tag
  echo "scale.sh: $1 failed:" >&2
  tail -3 "$raw/$1.err" >&2
}
run_one() {  # impl layout p collective sweep rep
  local impl="$1" layout="$2" p="$3" c="$4" sweep="$5" rep="$6"
  local -n args="$sweep"
  local tag="$impl.$c.$layout.$sweep.$rep"
  case "$impl" in
    cohort)
      if [ "$layout" = "${p}x1" ]; then
        if [ -n "${SCALE_BASELINE_ALGO:-}${SCALE_BASELINE_ENV:-}" ]; then
          # shellcheck disable=SC2086
          timeout "$TIMEOUT" env COHORT_SHM=off ${SCALE_BASELINE_ENV:-} \
            ${SCALE_BASELINE_ALGO:+COHORT_ALGO="$SCALE_BASELINE_ALGO"} build/tools/cohort-bench "$c" \
            "${args[@]}" -c 0 --spawn "$p" --bind "$BIND" >"$raw/forced.$c.$layout.$sweep.$rep" \
            2>"$raw/forced.$c.$layout.$sweep.$rep.err" || failed "forced.$c.$layout.$sweep.$rep"
        fi
        timeout "$TIMEOUT" env COHORT_SHM=off build/tools/cohort-bench "$c" "${args[@]}" -c 0 --spawn "$p" --bind "$BIND" \
          >"$raw/$tag" 2>"$raw/$tag.err" || failed "$tag"
      else
        timeout "$TIMEOUT" env COHORT_SHM_RANKS_PER_HOST=4 build/tools/cohort-bench "$c" "${args[@]}" -c 0 \
          --spawn "$p" --bind "$BIND" >"$raw/$tag" 2>"$raw/$tag.err" || failed "$tag"
      fi ;;
    openmpi)
      timeout "$TIMEOUT" mpirun -np "$p" --oversubscribe --mca btl tcp,self build/bench/mpi_bench "$c" \
        "${args[@]}" >"$raw/$tag" 2>"$raw/$tag.err" || failed "$tag" ;;
    gloo)
      local gloo_args=() skip=0 a
      for a in "${args[@]}"; do  # gloo_bench has no -R
        if [ "$skip" = 1 ]; then skip=0; continue; fi
        if [ "$a" = -R ]; then skip=1; continue; fi
        gloo_args+=("$a")
      done
      timeout "$TIMEOUT" build/bench/gloo_bench "$c" "${gloo_args[@]}" --spawn "$p" >"$raw/$tag" 2>"$raw/$tag.err" || failed "$tag" ;;
  esac
}
for ((rep = 0; rep < REPS; rep++)); do
  for c in $COLLECTIVES; do
    for p in $RANKS; do
      sweeps=(SMALL)
      [ "$p" -le "$LARGE_RANKS" ] && sweeps+=(LARGE)
      for sweep in "${sweeps[@]}"; do
        run_one cohort "${p}x1" "$p" "$c" "$sweep" "$rep"
        run_one openmpi "${p}x1" "$p" "$c" "$sweep" "$rep"
        # Gloo at 16 ranks took 39-66 ms an all_reduce from 64 B: its small sweep only.
        [ "$c" = all_reduce ] && [ "$sweep" = SMALL ] && run_one gloo "${p}x1" "$p" "$c" "$sweep" "$rep"
      done
      echo "$c at $p ranks done (repetition $((rep + 1)) of $REPS)" >&2
    done
    for p in $HOSTS4; do
      run_one cohort "$((p / 4))x4" "$p" "$c" SMALL "$rep"
    done
  done
done

/usr/bin/python3 - "$raw" "$OUT" "$REPS" "$COLLECTIVES" "$RANKS" "$HOSTS4" <<'PY'
import os, shutil, subprocess, sys
sys.path.insert(0, "bench/lib")
from bench_tables import load_medians, size_text
raw, out, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
colls, ranks, hosts4 = sys.argv[4].split(), sys.argv[5].split(), sys.argv[6].split()

def load(impl, coll, layout):
    return load_medians(f"{raw}/{impl}.{coll}.{layout}.*")


def cell(t):
    return "-" if t is None else f"{t:.1f}"

lines = [f"# cohort at many ranks over TCP against Open MPI and Gloo ({os.cpu_count()} CPUs), "
         f"median of {reps} run(s)", "",
         "Time per call in us; every rank its own host (TCP between every pair) unless the layout says "
         "hosts x ranks a host; cohort / Open MPI below 1: cohort is faster.", ""]
series = {}
for coll in colls:
    lines += [f"## {coll}", "", "| layout | size | cohort | forced | Open MPI | Gloo | cohort / Open MPI |",
              "|---|---|---|---|---|---|---|"]
    for p in ranks:
        c, m, g = load("cohort", coll, f"{p}x1"), load("openmpi", coll, f"{p}x1"), load("gloo", coll, f"{p}x1")
        f = load("forced", coll, f"{p}x1")
        for size in sorted(set(c) | set(m)):
            ct, mt = c.get(size), m.get(size)
            ratio = f"{ct / mt:.2f}" if ct and mt else "-"
            lines.append(f"| {p}x1 | {size_text(size)} | {cell(ct)} | {cell(f.get(size))} | {cell(mt)} | "
                         f"{cell(g.get(size))} | {ratio} |")
            series.setdefault(coll, {}).setdefault(size, []).append((int(p), ct, mt))
    for p in hosts4:
        layout = f"{int(p) // 4}x4"
        c = load("cohort", coll, layout)
        for size in sorted(c):
            lines.append(f"| {layout} | {size_text(size)} | {cell(c[size])} | - | - | - | - |")
    lines.append("")
text = "\n".join(lines)
open(os.path.join(out, "scale.md"), "w").write(text)
print(text)
if shutil.which("gnuplot"):
    for coll, by_size in series.items():
        data = os.path.join(out, f"scale_{coll}.dat")
        shown = [s for s in sorted(by_size) if s in (4, 16384, 262144, 4 << 20)]
        with open(data, "w") as f:
            for s in shown:
                f.write(f"# {size_text(s)}\n")
                for p, ct, mt in by_size[s]:
                    f.write(f"{p} {ct or 'NaN'} {mt or 'NaN'}\n")
                f.write("\n\n")
        plots = []
        for i, s in enumerate(shown):
            plots.append(f"'{data}' index {i} using 1:2 with linespoints title 'cohort {size_text(s)}'")
            plots.append(f"'{data}' index {i} using 1:3 with linespoints dashtype 2 title 'Open MPI {size_text(s)}'")
        script = (f"set terminal png size 900,600; set output '{out}/scale_{coll}.png'; set logscale xy; "
                  f"set xlabel 'ranks'; set ylabel 'us per call'; set title '{coll} over TCP'; set key left top; "
                  "plot " + ", ".join(plots))
        subprocess.run(["gnuplot", "-e", script], check=False)
PY
