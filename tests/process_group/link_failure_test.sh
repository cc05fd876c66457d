#!/usr/bin/env bash
# A host's network link fails under a running job: two "hosts" as network
# namespaces joined by a veth pair (each end shaped to 1 Gbit/s, so that an
# all_reduce lasts long enough to be cut in the middle), two ranks per host
# (shared memory within, TCP between), every rank running link_worker's
# checked all_reduces. Then host A's link goes down (`ip link set down`):
#
#   link_failure_test.sh WORKER returns      down for 3 s, then up again,
#       within the operations' 20 s timeout: every rank must finish every
#       all_reduce with every element right, the same count on each, and
#       one all_reduce must have lasted across the outage.
#   link_failure_test.sh WORKER stays_down   down for good, 4 s timeout:
#       every rank must fail, within the timeout plus the 2 s that the kill
#       test allows for a killed rank (process_test.cc), with an error
#       naming the other host's address and saying that it is unreachable.
#
# Needs root and iproute2 (tc for the shaping); prints a reason and exits 77
# (ctest: skipped) when the machine cannot make namespaces.
set -uo pipefail
worker="$1" case="$2"
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  echo "SKIP: needs root, iproute2 and tc to make network namespaces"; exit 77
fi
tag="lf$$"
a="${tag}a" b="${tag}b"
logs="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  ip netns pids "$a" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids "$b" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$logs"
}
trap cleanup EXIT
net="10.78.$(($$ % 200))"
source "$(dirname "$0")/two_host_namespaces.sh"
make_two_hosts "$a" "$b" "$tag" "$net"
tc -n "$a" qdisc add dev "${tag}x" root tbf rate 1gbit burst 256kb latency 50ms &&
  tc -n "$b" qdisc add dev "${tag}y" root tbf rate 1gbit burst 256kb latency 50ms ||
  { echo "SKIP: tc tbf failed"; exit 77; }

timeout_s=20 deadline_s=90
[ "$case" = stays_down ] && timeout_s=4 deadline_s=40
port=$((29700 + $$ % 200))
for host in 0 1; do
  ns="$a"; [ "$host" -eq 1 ] && ns="$b"
  # Both ranks of a host from one `ip netns exec` with its own /dev/shm, as on a real host.
  ip netns exec "$ns" bash -c "$OWN_SHM"'
    for rank in '"$((2 * host)) $((2 * host + 1))"'; do
      env RANK=$rank WORLD_SIZE=4 MASTER_ADDR='"$net.1"' MASTER_PORT='"$port"' \
        LINK_WORKER_TIMEOUT_S='"$timeout_s"' LINK_WORKER_FLOATS=1048576 \
        '"$worker"' '"$logs/stop"' >'"$logs"'/out.$rank 2>'"$logs"'/err.$rank &
    done
    wait' &
  pids+=($!)
done

wall_ns() { date +%s%N; }
# Waits until every rank said "ready" (the job is running).
for _ in $(seq 1 300); do
  [ "$(cat "$logs"/out.* 2>/dev/null | grep -c ready)" -eq 4 ] && break
  sleep 0.1
done
if [ "$(cat "$logs"/out.* 2>/dev/null | grep -c ready)" -ne 4 ]; then
  echo "the job did not start:"; tail -n 5 "$logs"/out.* "$logs"/err.*; exit 1
fi
sleep 0.5

down_at=$(wall_ns)
ip -n "$a" link set "${tag}x" down
if [ "$case" = returns ]; then
  sleep 3
  ip -n "$a" link set "${tag}x" up
  sleep 2
  touch "$logs/stop"
fi

# Every rank must end by the deadline (a hang fails the test).
end=$((SECONDS + deadline_s))
for pid in "${pids[@]}"; do
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
done
status=0
for rank in 0 1 2 3; do
  out="$(cat "$logs/out.$rank")"
  if [ "$case" = returns ]; then
    if ! grep -q "^rank $rank ok: " <<<"$out"; then
      echo "rank $rank did not finish after the link came back:"; echo "$out"; tail -n 20 "$logs/err.$rank"; status=1
    fi
  else
    line="$(grep "^rank $rank failed " <<<"$out")"
    if [ -z "$line" ]; then
      echo "rank $rank did not fail with the link down:"; echo "$out"; tail -n 20 "$logs/err.$rank"; status=1; continue
    fi
    at=$(sed -E 's/.* at ([0-9]+) ns:.*/\1/' <<<"$line")
    after_ms=$(((at - down_at) / 1000000))
    bound_ms=$((timeout_s * 1000 + 2000))
    echo "rank $rank failed ${after_ms} ms after the link went down (bound ${bound_ms} ms): ${line#*ns: }"
    [ "$after_ms" -le "$bound_ms" ] || { echo "rank $rank failed too late"; status=1; }
    other="$net.2"; [ "$rank" -ge 2 ] && other="$net.1"
    if ! grep -q "host $other" <<<"$line" || ! grep -q "unreachable" <<<"$line"; then
      echo "rank $rank's error does not name host $other as unreachable"; status=1
    fi
  fi
done
if [ "$case" = returns ] && [ $status -eq 0 ]; then
  counts=$(grep -ho "ok: [0-9]* all_reduces" "$logs"/out.* | sort -u | wc -l)
  [ "$counts" -eq 1 ] || { echo "ranks ran different counts:"; cat "$logs"/out.*; status=1; }
  longest=$(grep -ho "longest round [0-9.]*" "$logs"/out.* | awk "{print \$3}" | sort -n | tail -1)
  awk -v l="$longest" 'BEGIN { exit !(l >= 2.0) }' ||
    { echo "no round of all_reduces lasted across the 3 s outage (longest ${longest} s)"; status=1; }
  [ $status -eq 0 ] && echo "link down 3 s mid-job, then up: every rank finished, all elements right ($(grep -ho "ok: .*" "$logs/out.0"))"
fi
exit $status
