# two_host_namespaces.sh, sourced by the tests that need two "hosts":
# make_two_hosts NS_A NS_B LINK NET makes network namespaces NS_A and NS_B
# joined by a veth pair (LINKx in NS_A at NET.1, LINKy in NS_B at NET.2,
# a /24), loopback and both ends up. A "host" is also its own /dev/shm:
# ranks that share /dev/shm share memory whatever their network
# (src/transport/shm/host_identity.h), so each host's `ip netns exec` runs
# $OWN_SHM first (a tmpfs in the mount namespace that exec makes). Exits 77 (ctest: skipped) when the
# machine cannot make them; the caller's trap removes the namespaces.
make_two_hosts() {
  local a="$1" b="$2" link="$3" net="$4"
  ip netns add "$a" && ip netns add "$b" || { echo "SKIP: ip netns add failed"; exit 77; }
  ip link add "${link}x" netns "$a" type veth peer name "${link}y" netns "$b" || { echo "SKIP: veth failed"; exit 77; }
  ip -n "$a" addr add "$net.1/24" dev "${link}x"
  ip -n "$b" addr add "$net.2/24" dev "${link}y"
  ip -n "$a" link set lo up
  ip -n "$b" link set lo up
  ip -n "$a" link set "${link}x" up
  ip -n "$b" link set "${link}y" up
}

OWN_SHM='mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 1'
