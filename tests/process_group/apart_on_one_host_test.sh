#!/usr/bin/env bash
# Ranks started apart on one host: each of two ranks by its own
# `ip netns exec` into one network namespace, so each has a mount namespace
# of its own (as ranks in separate containers would) but the same /dev/shm.
# What decides shared memory is whether they can share it
# (src/transport/shm/host_identity.h), so they must talk over shared memory.
# Then the same two ranks, each given its own /dev/shm as well: now they
# cannot, and must talk over TCP. Needs root and iproute2 (ctest: skipped
# otherwise).
set -uo pipefail
worker="$1"
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: needs root and iproute2 to make network namespaces"; exit 77
fi
tag="c$$"
ns="${tag}h"
logs="$(mktemp -d)"
cleanup() {
  ip netns del "$ns" 2>/dev/null
  rm -rf "$logs"
}
trap cleanup EXIT
ip netns add "$ns" || { echo "SKIP: ip netns add failed"; exit 77; }
ip -n "$ns" link set lo up
port=$((29800 + $$ % 100))
status=0

# run_apart CASE PREFIX: both ranks, each from its own `ip netns exec`, PREFIX run first in each.
run_apart() {
  local case="$1" prefix="$2" pids=() rank
  port=$((port + 1))
  for rank in 0 1; do
    ip netns exec "$ns" bash -c "$prefix"'
      exec env RANK='"$rank"' WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT='"$port"' COHORT_LOG_LEVEL=debug \
        '"$worker"' allreduce env:// >'"$logs/$case.out.$rank"' 2>'"$logs/$case.err.$rank"&
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}

run_apart shared ":"
run_apart own_shm "mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 1"
for rank in 0 1; do
  mate=$((1 - rank))
  for case in shared own_shm; do
    grep -q " ok" "$logs/$case.out.$rank" || {
      echo "$case: rank $rank did not finish:"; cat "$logs/$case.err.$rank"; status=1; }
  done
  grep -q "talks to rank $mate (.*) over shared memory" "$logs/shared.err.$rank" || {
    echo "rank $rank, started apart but with the same /dev/shm: expected shared memory to rank $mate:"
    cat "$logs/shared.err.$rank"; status=1; }
  grep -q "rank $rank connected to 0 peers over TCP" "$logs/shared.err.$rank" || {
    echo "rank $rank, sharing /dev/shm: expected no TCP connection to rank $mate:"
    cat "$logs/shared.err.$rank"; status=1; }
  grep -q "talks to rank $mate (.*) over TCP" "$logs/own_shm.err.$rank" || {
    echo "rank $rank, with a /dev/shm of its own: expected TCP to rank $mate:"
    cat "$logs/own_shm.err.$rank"; status=1; }
done
[ $status -eq 0 ] && echo "ranks started apart share memory when they share /dev/shm, and use TCP when they do not"
exit $status
