// Hierarchical all_reduce for a group that spans hosts. Through the
// leaders (the table's hierarchical): reduce within each host (straight
// through shared memory), all_reduce among one leader per host (over TCP),
// then broadcast within each host; only one rank per host puts the data on
// the network, and the hosts' links carry 1/k of what a flat ring over all
// k ranks of a host would send. In shares (hierarchical_shares, large
// buffers where every host holds the same number of ranks): a hierarchical
// reduce_scatter and all_gather, every local rank carrying its share over
// the network in parallel streams, pipelined with the host's copies
// through shared memory, where through the leader alone one rank's copies
// and one stream bound it. The cost model decides between them
// (registry.cc).
#include "algorithms/shm_direct.h"
#include "algorithms/sub_transport.h"

namespace cohort {

namespace {

Status through_leaders(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op);

}  // namespace

Status hierarchical_all_reduce(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op,
                               bool in_shares) {
  const size_t p = static_cast<size_t>(c.transport.size());
  // The table offers shares only where the hosts hold equal ranks; the
  // check stays, since a forced choice of a group seen differently must
  // not split the ranks between the two paths (every rank sees the same).
  if (!in_shares || !hosts_hold_equal_ranks(c.transport)) return through_leaders(c, slots, buf, op);
  // The first P x (count / P) elements in shares, the few left over
  // (fewer than P) through the leaders.
  const size_t body = buf.count / p * p;
  Status st =
      body ? all_reduce_in_shares(c, slots, Buffer{buf.data, body, buf.dtype}, op) : Status::ok_status();
  if (!st.ok() || body == buf.count) return st;
  const Buffer rest{static_cast<uint8_t*>(buf.data) + body * dtype_size(buf.dtype), buf.count - body,
                    buf.dtype};
  return through_leaders(c, slots, rest, op);
}

namespace {

Status through_leaders(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op) {
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
    Result<Algorithm> a = c.leaders
                              ? c.leaders->choose(Collective::kAllReduce, buf.bytes())
                              : Result<Algorithm>(cheapest(Collective::kAllReduce,
                                                           GroupShape::flat(static_cast<int>(leaders.size())),
                                                           CostModel::from_config(), buf.bytes()));
    if (!a.ok()) return a.status();
    st = all_reduce(leader_context, buf, op, a.value());
    if (!st.ok()) return st;
  }
  if (local.size() > 1) {
    st = slots ? shm_broadcast(c, *slots, buf, 0) : broadcast(host_context, buf, 0);
  }
  return st;
}

}  // namespace
}  // namespace cohort
