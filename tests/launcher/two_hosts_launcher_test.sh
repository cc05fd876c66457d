#!/usr/bin/env bash
# Two "hosts" as network namespaces joined by a veth pair, a cohortrun in
# each, meeting through the store backend (host A hosts the store) with
# --nnodes 1:2: four workers run one job; then host B's launcher is killed
# with SIGKILL, its workers die with it, A's workers fail on the lost peer,
# and A starts the next round alone (restart 1, world size 2) and finishes.
# Needs root and iproute2; exits 77 (skipped) when it cannot make namespaces.
set -uo pipefail
launcher="$1" worker="$2"
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: needs root and iproute2 to make network namespaces"; exit 77
fi
tag="l$$"
a="${tag}a" b="${tag}b"
net="10.78.$(($$ % 200))"
logs="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  for ns in "$a" "$b"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$logs"
}
trap cleanup EXIT
ip netns add "$a" && ip netns add "$b" || { echo "SKIP: ip netns add failed"; exit 77; }
ip link add "${tag}x" netns "$a" type veth peer name "${tag}y" netns "$b" || { echo "SKIP: veth failed"; exit 77; }
ip -n "$a" addr add "$net.1/24" dev "${tag}x"
ip -n "$b" addr add "$net.2/24" dev "${tag}y"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "${tag}x" up
ip -n "$b" link set "${tag}y" up

flags=(--nnodes 1:2 --nproc-per-node 2 --rdzv-backend store --rdzv-endpoint "$net.1:29655" --rdzv-id "job$$"
  --max-restarts 1 --rdzv-conf last_call_timeout=2,join_timeout=30)
own_shm='mount -t tmpfs -o mode=1777 tmpfs /dev/shm'
# ip netns exec execs the command, and so does sh after giving the host its
# own /dev/shm (as a real host has: ranks that share it share memory), so
# $! is the launcher itself.
COHORT_LAUNCHER_STOP_TIMEOUT_S=3 ip netns exec "$a" sh -c "$own_shm"' && exec "$@"' sh "$launcher" "${flags[@]}" "$worker" steps 40 >"$logs/a" 2>&1 &
pid_a=$!
pids+=("$pid_a")
sleep 0.5
COHORT_LAUNCHER_STOP_TIMEOUT_S=3 ip netns exec "$b" sh -c "$own_shm"' && exec "$@"' sh "$launcher" "${flags[@]}" --log-dir "$logs/files-b" "$worker" steps 40 >"$logs/b" 2>&1 &
pid_b=$!
pids+=("$pid_b")

# Wait (bounded) until all four workers of the first round run.
for _ in $(seq 1 200); do
  [ "$(cat "$logs/a" "$logs/b" | grep -c "running rank . of 4")" -eq 4 ] && break
  sleep 0.1
done
if [ "$(cat "$logs/a" "$logs/b" | grep -c "running rank . of 4")" -ne 4 ]; then
  echo "the four workers never ran together:"; cat "$logs/a" "$logs/b"; exit 1
fi
grep -q "\[rank2\]: running rank 2 of 4" "$logs/b" || { echo "host B did not get ranks 2-3:"; cat "$logs/b"; exit 1; }

kill -9 "$pid_b"
wait "$pid_b" 2>/dev/null
status=0
# B's workers die with their launcher (parent-death signal).
for _ in $(seq 1 50); do [ -z "$(ip netns pids "$b")" ] && break; sleep 0.1; done
if [ -n "$(ip netns pids "$b")" ]; then echo "processes left on host B: $(ip netns pids "$b")"; status=1; fi

wait "$pid_a"
code=$?
if [ $code -ne 0 ]; then echo "launcher A exited $code:"; cat "$logs/a"; exit 1; fi
for rank in 0 1; do
  if ! grep -q "\[rank$rank\]: ok rank $rank of 2 restart 1" "$logs/a"; then
    echo "rank $rank on host A did not finish the second round alone:"; cat "$logs/a"; status=1
  fi
done
[ $status -eq 0 ] && echo "2 hosts, 4 workers; host B killed; host A went on alone in round 2 (restart 1, world 2)"
exit $status
