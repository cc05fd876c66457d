#!/usr/bin/env bash
# multi_host.sh: collectives across hosts at a link's speed (issue 41).
# Makes a cluster on this machine: H hosts as network namespaces, each with
# one link (a veth pair) to a switch namespace holding a bridge, each link
# shaped to RATE each way with tc's tbf (netem is not in this kernel), L
# ranks per host started from one `ip netns exec` with a /dev/shm of its
# own (one host: shared memory between its ranks, and only them). Runs torch.distributed's collectives from Python
# over cohort and over gloo (GLOO_SOCKET_IFNAME names the link), side by
# side, and prints per row the time, busbw (nccl-tests' factors over all
# ranks) and the link-bound time: the least each host's link must carry,
# at RATE:
#   all_reduce 2 S (H-1)/H; all_gather and reduce_scatter S (H-1)/H (S the
#   whole gathered tensor, the whole input); broadcast S; all_to_all
#   L S (H-1)/H (S each rank's send buffer).
# Everything it makes is removed on exit. Needs root and iproute2 (tc).
#
#   bench/multi_host.sh [RATE=2gbit] [LAYOUTS="2x1 4x1 2x2"] \
#     [COLLECTIVES="all_reduce all_gather reduce_scatter broadcast all_to_all"] [MAX=64M] [REPS=1]
#
# LAYOUTS: HxL, hosts x ranks per host. Use a RATE the machine sustains
# (1-2 gbit on 2 cores) so that the link, not the CPU, bounds large sizes.
# Needs build/python (cohort_torch) and torch.
set -uo pipefail
cd "$(dirname "$0")/.."
RATE="${1:-2gbit}"
LAYOUTS="${2:-2x1 4x1 2x2}"
COLLECTIVES="${3:-all_reduce all_gather reduce_scatter broadcast all_to_all}"
MAX="${4:-64M}"
REPS="${5:-1}"
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  echo "multi_host.sh: needs root, ip and tc (iproute2) to make network namespaces and shape links" >&2
  exit 2
fi
to_bytes() { python3 -c "import sys; t=sys.argv[1].upper(); m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(float(t[:-1])*m[t[-1]]) if t[-1] in m else int(t))" "$1"; }
to_bits() { python3 -c "import sys,re; m=re.fullmatch(r'([0-9.]+)([kmg]?)bit',sys.argv[1].lower()) or sys.exit('RATE: NUMBER[k|m|g]bit, e.g. 2gbit'); print(float(m[1])*{'':1,'k':1e3,'m':1e6,'g':1e9}[m[2]])" "$1"; }
max_bytes=$(to_bytes "$MAX")
rate_bits=$(to_bits "$RATE") || exit 2
tag="mh$$"
switch="${tag}s"
hosts=()
raw="$(mktemp -d)"
cleanup() {
  for ns in "${hosts[@]}" "$switch"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$raw"
}
trap cleanup EXIT

# make_cluster H: the switch, H hosts 10.98.0.1..H on eth "hlink", shaped.
make_cluster() {
  local h="$1" i ns
  for ns in "${hosts[@]}" "$switch"; do ip netns del "$ns" 2>/dev/null; done
  hosts=()
  ip netns add "$switch" || exit 1
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  ip -n "$switch" link set lo up
  for ((i = 0; i < h; i++)); do
    ns="${tag}h$i"
    hosts+=("$ns")
    ip netns add "$ns" || exit 1
    ip link add "${tag}a$i" netns "$ns" type veth peer name "${tag}b$i" netns "$switch" || exit 1
    ip -n "$ns" link set "${tag}a$i" name hlink
    ip -n "$ns" addr add "10.98.0.$((i + 1))/24" dev hlink
    ip -n "$ns" link set lo up
    ip -n "$ns" link set hlink up
    ip -n "$switch" link set "${tag}b$i" master br0
    ip -n "$switch" link set "${tag}b$i" up
    # Each way: the host's sends leave through hlink, its receives through
    # the switch's port.
    tc -n "$ns" qdisc add dev hlink root tbf rate "$RATE" burst 512kb latency 100ms
    tc -n "$switch" qdisc add dev "${tag}b$i" root tbf rate "$RATE" burst 512kb latency 100ms
  done
}

port=29700
# run BACKEND COLLECTIVE H L: one job, rank 0's lines into $raw.
run() {
  local backend="$1" c="$2" h="$3" l="$4" i
  port=$((port + 1))
  local pids=()
  local program="bench/python/host_collectives.py $backend $c 4 $max_bytes"
  [ "$backend" = tcp ] && program="bench/python/raw_tcp_all_to_all.py 1048576 $max_bytes"
  [ "$backend" = paced ] && program="bench/python/raw_tcp_all_to_all.py 1048576 $max_bytes $rate_bits $l"
  for ((i = 0; i < h; i++)); do
    ip netns exec "${hosts[$i]}" bash -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 1
      for ((r = '"$((i * l))"'; r < '"$(((i + 1) * l))"'; r++)); do
        env RANK=$r WORLD_SIZE='"$((h * l))"' MASTER_ADDR=10.98.0.1 MASTER_PORT='"$port"' \
          GLOO_SOCKET_IFNAME=hlink OMP_NUM_THREADS=1 PYTHONPATH='"$PWD/build/python"' \
          python3 '"$program"' \
          >'"$raw"'/out.$r 2>'"$raw"'/err.$r &
      done
      wait' &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  if ! [ -s "$raw/out.0" ]; then
    echo "multi_host.sh: $backend $c on ${h}x$l failed:" >&2
    tail -5 "$raw"/err.* >&2
    return 1
  fi
  cat "$raw/out.0"
}

echo "# collectives across hosts: network namespaces on a bridge, each host's link shaped to $RATE each way"
echo "# (tc tbf); torch.distributed from Python, float32, median call of the slowest rank, $REPS run(s)"
for layout in $LAYOUTS; do
  h="${layout%x*}" l="${layout#*x}"
  make_cluster "$h"
  for c in $COLLECTIVES; do
    : >"$raw/cohort.all" && : >"$raw/gloo.all" && : >"$raw/tcp.all" && : >"$raw/paced.all"
    for ((rep = 0; rep < REPS; rep++)); do
      run cohort "$c" "$h" "$l" >>"$raw/cohort.all" || continue
      run gloo "$c" "$h" "$l" >>"$raw/gloo.all" || continue
      # all_to_all's other anchors: plain TCP sockets, every flow at once,
      # unpaced and paced to an even share of the link.
      if [ "$c" = all_to_all ] && [ "$max_bytes" -ge 1048576 ]; then
        run tcp "$c" "$h" "$l" >>"$raw/tcp.all"
        run paced "$c" "$h" "$l" >>"$raw/paced.all"
      fi
    done
    echo
    echo "## $c, $h hosts x $l ranks"
    echo
    python3 - "$raw/cohort.all" "$raw/gloo.all" "$c" "$h" "$l" "$rate_bits" "$raw/tcp.all" "$raw/paced.all" <<'PY'
import statistics, sys
cohort, gloo, c, h, l, rate = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
tcp, paced = sys.argv[7], sys.argv[8]
def load(path):
    d = {}
    for line in open(path):
        _, size, us = line.split()
        d.setdefault(int(size), []).append(float(us))
    return {k: statistics.median(v) for k, v in d.items()}
a, g, t, pt = load(cohort), load(gloo), load(tcp), load(paced)
n = h * l
link = {"all_reduce": lambda s: 2 * s * (h - 1) / h, "all_gather": lambda s: s * (h - 1) / h,
        "reduce_scatter": lambda s: s * (h - 1) / h, "broadcast": lambda s: s,
        "all_to_all": lambda s: l * s * (h - 1) / h}[c]
bus = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
       "broadcast": 1.0, "all_to_all": (n - 1) / n}[c]
# With the plain TCP anchors (all_to_all): four more columns, their times
# and fractions of the bound, what TCP reaches with every flow at once.
extra = " plain TCP (us) | bound / TCP | paced TCP (us) | bound / paced |" if t else ""
print("| size (B) | cohort (us) | gloo (us) | cohort busbw (GB/s) | gloo busbw (GB/s) | link bound (us) | bound / cohort | gloo / cohort |" + extra)
print("|---|---|---|---|---|---|---|---|" + ("---|---|---|---|" if t else ""))
for s in sorted(set(a) | set(g)):
    ta, tg = a.get(s), g.get(s)
    bound = link(s) * 8 / rate * 1e6
    f = lambda t: f"{t:.1f}" if t else "-"
    bw = lambda t: f"{bus * s / t / 1e3:.3f}" if t else "-"
    ratio = lambda b, t: f"{b / t:.2f}" if t else "-"
    print(f"| {s} | {f(ta)} | {f(tg)} | {bw(ta)} | {bw(tg)} | {bound:.1f} | "
          f"{(bound / ta if ta else 0):.2f} | {(tg / ta if ta and tg else 0):.2f} |"
          + (f" {f(t.get(s))} | {ratio(bound, t.get(s))} | {f(pt.get(s))} | {ratio(bound, pt.get(s))} |" if t else ""))
PY
  done
done
