#!/usr/bin/env bash
# plot_multi_host.sh: the plot of bench/multi_host.sh's tables, one panel
# per layout (hosts x ranks per host), each collective's fraction of the
# link-bound time against size, cohort solid and Gloo dashed.
#
#   bench/multi_host.sh 2gbit "2x1 2x2 4x1" > results.md
#   bench/plot_multi_host.sh results.md docs/img/multi_host.png
#
# Needs gnuplot (Debian's gnuplot-nox).
set -euo pipefail
results="$1" png="$2"
command -v gnuplot >/dev/null || { echo "plot_multi_host.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
dat="$(mktemp -d)"
trap 'rm -rf "$dat"' EXIT
# One data file per layout and collective: size, bound/cohort, bound/gloo.
python3 - "$results" "$dat" <<'PY'
import re, sys
results, out = sys.argv[1], sys.argv[2]
current = None
layouts = []
for line in open(results):
    m = re.match(r"## (\w+), (\d+) hosts x (\d+) ranks", line)
    if m:
        c, h, l = m.groups()
        current = open(f"{out}/{c}_{h}x{l}.dat", "w")
        if f"{h}x{l}" not in layouts:
            layouts.append(f"{h}x{l}")
        continue
    cells = [x.strip() for x in line.strip().strip("|").split("|")]
    if current and len(cells) in (8, 10, 12) and cells[0].isdigit() and int(cells[0]) >= 16384:
        size, ta, tg, bound = int(cells[0]), cells[1], cells[2], float(cells[5])
        ratio = lambda t: f"{bound / float(t):.3f}" if t not in ("-", "") and float(t) > 0 else "NaN"
        current.write(f"{size} {ratio(ta)} {ratio(tg)}\n")
open(f"{out}/layouts", "w").write(" ".join(layouts))
PY
layouts="$(cat "$dat/layouts")"
panels=$(wc -w <<<"$layouts")
gnuplot <<GP
set terminal pngcairo noenhanced size $((420 * panels)),420 font ",9"
set output "$png"
set multiplot layout 1,$panels title "fraction of the link-bound time (1 = the link's speed); cohort solid, Gloo dashed"
set logscale x 2
set format x "%.0b%B"
set xlabel "size (bytes)"
set yrange [0:1.1]
set grid
set key bottom right
colls = "all_reduce all_gather reduce_scatter broadcast all_to_all"
do for [layout in "$layouts"] {
  set title layout." (hosts x ranks per host)"
  plot for [i=1:5] "$dat/".word(colls, i)."_".layout.".dat" using 1:2 with linespoints lc i pt 7 ps 0.5 title word(colls, i), \
       for [i=1:5] "$dat/".word(colls, i)."_".layout.".dat" using 1:3 with lines lc i dt 2 notitle
}
unset multiplot
GP
echo "wrote $png"
