// Hierarchical all_reduce for a group that spans hosts. Small: reduce
// within each host (straight through shared memory), all_reduce among one
// leader per host (over TCP), then broadcast within each host; only one
// rank per host puts the data on the network, and the hosts' links carry
// 1/k of what a flat ring over all k ranks of a host would send. Large,
// with the same number of ranks on every host: a hierarchical
// reduce_scatter and all_gather (each local rank carries its share over
// the network, pipelined with the host's copies).
#include "algorithms/shm_direct.h"
#include "algorithms/sub_transport.h"

namespace cohort {

namespace {

// From this size on, with the same number of ranks on every host, every
// local rank carries a share over the network (all_reduce_in_shares,
// hierarchical_gather_scatter.cc): the host's link then carries the data
// in parallel streams, pipelined with the copies through shared memory,
// where through the leader alone one rank's copies and one stream bound it.
constexpr size_t kSharesFromBytes = 1 << 20;

Status through_leaders(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op);

}  // namespace

Status hierarchical_all_reduce(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op) {
  const size_t p = static_cast<size_t>(c.transport.size());
  if (buf.bytes() < kSharesFromBytes || !hosts_hold_equal_ranks(c.transport)) {
    return through_leaders(c, slots, buf, op);
  }
  // The first P x (count / P) elements in shares, the few left over
  // (fewer than P) through the leaders.
  const size_t body = buf.count / p * p;
  Status st = all_reduce_in_shares(c, slots, Buffer{buf.data, body, buf.dtype}, op);
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
