#!/usr/bin/env bash
# Two "hosts" as network namespaces joined by a veth pair: four ranks (two
# per host) join through env:// with MASTER_ADDR on host A, all_reduce, form
# a subgroup, and every rank must have published its veth address, never
# loopback. The two ranks of a host start from one `ip netns exec` with
# its own /dev/shm (as on a real host), so they talk through shared memory,
# to the other host over TCP, and all_reduce runs hierarchically. Needs root and iproute2; prints a reason and exits 0 when the
# machine cannot make namespaces (ctest reports it as skipped).
set -uo pipefail
worker="$1"
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: needs root and iproute2 to make network namespaces"; exit 77
fi
tag="c$$"
a="${tag}a" b="${tag}b"
logs="$(mktemp -d)"
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$logs"
}
trap cleanup EXIT
source "$(dirname "$0")/two_host_namespaces.sh"
make_two_hosts "$a" "$b" "$tag" "10.77.$(($$ % 200))"
master="10.77.$(($$ % 200)).1"
port=29611
pids=()
for host in 0 1; do
  ns="$a"; [ "$host" -eq 1 ] && ns="$b"
  ip netns exec "$ns" bash -c "$OWN_SHM"'
    for rank in '"$((2 * host)) $((2 * host + 1))"'; do
      env RANK=$rank WORLD_SIZE=4 MASTER_ADDR='"$master"' MASTER_PORT='"$port"' COHORT_LOG_LEVEL=debug \
        '"$worker"' allreduce env:// >'"$logs"'/out.$rank 2>'"$logs"'/err.$rank &
    done
    wait' &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid"; done
for rank in 0 1 2 3; do
  grep -q " ok" "$logs/out.$rank" || { echo "rank $rank did not finish:"; cat "$logs/err.$rank"; status=1; }
  if ! grep -q "group default: rank $rank of 4 connected from 10.77." "$logs/err.$rank"; then
    echo "rank $rank did not publish its veth address:"; cat "$logs/err.$rank"; status=1
  fi
  if grep -q "connected from 127." "$logs/err.$rank"; then echo "rank $rank published loopback"; status=1; fi
  mate=$((rank ^ 1)) other=$(((rank + 2) % 4))
  if ! grep -q "talks to rank $mate (.*) over shared memory" "$logs/err.$rank" ||
    ! grep -q "talks to rank $other (.*) over TCP" "$logs/err.$rank"; then
    echo "rank $rank: expected shared memory to rank $mate and TCP to rank $other:"; cat "$logs/err.$rank"
    status=1
  fi
  # The mate shares memory with no connection: only the other host's two.
  if ! grep -q "rank $rank connected to 2 peers over TCP" "$logs/err.$rank" ||
    grep -q "rank $rank connected to 3 peers over TCP" "$logs/err.$rank"; then
    echo "rank $rank: expected TCP connections to the other host's 2 ranks only:"; cat "$logs/err.$rank"
    status=1
  fi
  if ! grep -q "rank $rank: 2 hosts, shared memory within hosts; all_reduce is hierarchical" "$logs/err.$rank"; then
    echo "rank $rank did not run all_reduce hierarchically:"; cat "$logs/err.$rank"; status=1
  fi
done
[ $status -eq 0 ] && echo "4 ranks on 2 namespaces: hierarchical all_reduce (shm within, TCP between) and subgroup ok, every rank published its veth address"
exit $status
