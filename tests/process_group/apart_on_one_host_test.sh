#!/usr/bin/env bash
# Ranks started apart on one host: each of two ranks by its own
# `ip netns exec` into one network namespace, so each has a mount namespace
# of its own (as ranks in separate containers would) but the same /dev/shm.
# What decides shared memory is whether they can share it
# (src/transport/shm/host_identity.h), so they must talk over shared memory.
# Then the same two ranks, each given its own /dev/shm as well: now they
# cannot, and must talk over TCP. Last, two ranks that share a small
# /dev/shm: where a smaller arena fits they keep shared memory and the
# leader says what shrank; where none fits they all fall back to TCP, and
# say why.
# Needs root, iproute2 and unshare (ctest: skipped otherwise).
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

# run_together CASE SIZE: both ranks in one mount namespace whose /dev/shm
# is a tmpfs of SIZE (as a container's 64 MiB one, small for many ranks):
# they share /dev/shm, so they try it.
run_together() {
  local case="$1" size="$2"
  port=$((port + 1))
  unshare -m --propagation private bash -c '
    mount -t tmpfs -o size='"$size"',mode=1777 tmpfs /dev/shm || exit 1
    for rank in 0 1; do
      env RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT='"$port"' COHORT_LOG_LEVEL=debug \
        '"$worker"' allreduce env:// >'"$logs/$case"'.out.$rank 2>'"$logs/$case"'.err.$rank &
    done
    wait'
}

run_apart shared ":"
run_apart own_shm "mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 1"
# 4 MiB: too small for the default arena of two ranks (7 MiB), enough for
# smaller rings and slots. 256 KiB: too small for any arena.
run_together tight 4m
run_together cramped 256k
# expect CASE RANK PATTERN WHAT: rank RANK's log of CASE has PATTERN, or
# the test fails saying WHAT was expected, with the log.
expect() {
  grep -q -- "$3" "$logs/$1.err.$2" && return
  echo "$1, rank $2: expected $4:"; cat "$logs/$1.err.$2"; status=1
}
for rank in 0 1; do
  mate=$((1 - rank))
  for case in shared own_shm tight cramped; do
    grep -q " ok" "$logs/$case.out.$rank" || {
      echo "$case: rank $rank did not finish:"; cat "$logs/$case.err.$rank"; status=1; }
  done
  expect shared $rank "talks to rank $mate (.*) over shared memory" \
    "shared memory to rank $mate: started apart, but with the same /dev/shm"
  expect shared $rank "rank $rank connected to 0 peers over TCP" "no TCP connection, sharing /dev/shm"
  expect own_shm $rank "talks to rank $mate (.*) over TCP" "TCP to rank $mate, with a /dev/shm of its own"
  expect tight $rank "talks to rank $mate (.*) over shared memory" \
    "shared memory to rank $mate in a smaller arena, sharing a 4 MiB /dev/shm"
  expect cramped $rank "talks to rank $mate (.*) over TCP" "TCP to rank $mate: /dev/shm is too small for any arena"
  expect cramped $rank "rank $rank: shared memory is unavailable, using TCP on this host: .*/dev/shm has" \
    "a warning naming /dev/shm's room"
done
expect tight 0 "rank 0: /dev/shm has room for .* its rings are 16384 bytes (asked 1048576) and its slots .*more turns" \
  "the leader's warning that the arena shrank"
[ $status -eq 0 ] && echo "ranks started apart share memory when they share /dev/shm, use TCP when they do not;" \
  "a small /dev/shm takes a smaller arena, and one without room for any sends all to TCP together"
exit $status
