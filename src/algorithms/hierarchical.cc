// Hierarchical all_reduce for a group that spans hosts: reduce within each
// host (straight through shared memory), all_reduce among one leader per
// host (over TCP), then broadcast within each host. Only one rank per host
// puts the data on the network, and the hosts' links carry 1/k of what a
// flat ring over all k ranks of a host would send.
#include "algorithms/shm_direct.h"
#include "algorithms/sub_transport.h"

namespace cohort {

Status hierarchical_all_reduce(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op) {
  Transport& t = c.transport;
  const int me = t.rank();
  std::vector<int> local, leaders;
  for (int q = 0; q < t.size(); ++q) {
    if (t.host_of(q) == t.host_of(me)) local.push_back(q);
    if (t.host_of(q) == q) leaders.push_back(q);
  }
  SubTransport host(t, local);
  AlgoContext host_context{host, c.sequence, c.deadline, c.what, c.scratch};
  Status st;
  if (local.size() > 1) {
    // The host's leader is its lowest rank: local index 0 in both views.
    st = slots ? shm_reduce(c, *slots, buf, 0, op) : reduce(host_context, buf, 0, op);
    if (!st.ok()) return st;
  }
  if (t.host_of(me) == me && leaders.size() > 1) {
    SubTransport between(t, leaders);
    AlgoContext leader_context{between, c.sequence, c.deadline, c.what, c.scratch};
    st = all_reduce(leader_context, buf, op, network_algorithm(Collective::kAllReduce, buf.bytes()));
    if (!st.ok()) return st;
  }
  if (local.size() > 1) {
    st = slots ? shm_broadcast(c, *slots, buf, 0) : broadcast(host_context, buf, 0);
  }
  return st;
}

}  // namespace cohort
