// shm_direct.cc: how the direct collectives meet. A rank that must wait for
// the others (wait_until_slow) keeps its own requests moving and watches for
// dead peers (check_peers); ranks that run different operations are told
// how (stamps_differ). These are the slow paths of shm_direct_internal.h.
// barrier, which is nothing but a meeting, is here too. The collectives
// themselves: shm_direct_reduce.cc, shm_direct_gather_scatter.cc and
// shm_direct_all_to_all.cc.
#include "algorithms/shm_direct.h"

#include <string>

#include "algorithms/shm_direct_internal.h"

namespace cohort {
namespace shm_direct_internal {
namespace {

// describe names the operation of a stamp, for a desync error.
std::string describe(const shm::HostSlots::Stamp& s) {
  std::string text =
      std::string(collective_name(static_cast<Collective>(s.op >> 16))) + " #" + std::to_string(s.sequence);
  const int root = static_cast<int16_t>(s.op & 0xFFFF);
  if (root >= 0) text += " (root " + std::to_string(root) + ")";
  return text;
}

}  // namespace

Status check_peers(AlgoContext& c, shm::HostSlots& a, int who, uint64_t target) {
  Transport& t = c.transport;
  Status st = t.poll_health();
  if (!st.ok()) return st;
  for (int q = 0; q < a.local_size(); ++q) {
    const int rank = a.local_ranks()[static_cast<size_t>(q)];
    if ((who < 0 || q == who) && q != a.local_index() && a.arrivals_of(q) < target && t.peer_gone(rank)) {
      return network_error(t.peer_name(rank) + " closed its connection before reaching " + c.what +
                           " (its process exited, or it destroyed the group)");
    }
  }
  return Status::ok_status();
}

Status wait_until_slow(AlgoContext& c, shm::HostSlots& a, int who, uint64_t target) {
  // What the service below needs, captured by one reference so that the
  // std::function holding it fits in place (no allocation per wait).
  struct Wait {
    AlgoContext& c;
    shm::HostSlots& a;
    int who;
    uint64_t target;
  } w{c, a, who, target};
  // While waiting, keep this rank's point-to-point requests moving (a peer
  // may need one to get here) and, between sleeps, notice a dead peer.
  return a.wait_for(
      who, target, c.deadline,
      [&w](bool deep, bool* busy) {
        Transport& t = w.c.transport;
        if (t.has_pending()) t.progress(Deadline::at(Clock::now()));
        *busy = t.has_pending();
        if (!deep) return Status::ok_status();
        return check_peers(w.c, w.a, w.who, w.target);
      },
      c.what);
}

// stamps_differ says how `theirs` differs from `mine`. When `theirs` is
// of another operation, the stamp local rank q wrote for this rank's
// operation, if any, tells more: a rank that broadcasts through its posts
// leaves its slot halves' stamps as they were, and the reverse.
Status stamps_differ(const shm::HostSlots& a, int q, shm::HostSlots::Stamp theirs,
                     const shm::HostSlots::Stamp& mine, const std::string& what) {
  for (int i = 0; i < 2 + shm::HostSlots::kPosts && theirs.sequence != mine.sequence; ++i) {
    const auto other = i < 2 ? a.stamp_of(q, i) : a.post_stamp_of(q, i - 2);
    if (other.sequence == mine.sequence) theirs = other;
  }
  const std::string peer = "rank " + std::to_string(a.local_ranks()[static_cast<size_t>(q)]);
  if (theirs.sequence != mine.sequence || theirs.op != mine.op) {
    return Status(StatusCode::kDesync, peer + " is in " + describe(theirs) + " while this rank is in " +
                                           what +
                                           ": the ranks called different collectives (or in another order)");
  }
  return Status(StatusCode::kDesync, peer + " called " + describe(theirs) + " with " +
                                         std::to_string(theirs.bytes) + " bytes but this rank with " +
                                         std::to_string(mine.bytes) + " in " + what +
                                         ": sizes differ between ranks");
}

Status read_peer(AlgoContext& c, shm::HostSlots& a, int q, void* into, uint64_t address, size_t bytes) {
  Status st = a.read_from(q, into, address, bytes);
  if (st.ok() && a.left(q, c.sequence)) {
    // It gave up before we were done: what we read may already be freed.
    st = network_error("rank " + std::to_string(a.local_ranks()[static_cast<size_t>(q)]) + " left " + c.what +
                       " while this rank was reading its buffer");
  }
  if (st.ok()) return st;
  Status why = c.transport.poll_health();
  return why.ok() ? st : why;
}

}  // namespace shm_direct_internal

std::string why_shm_way_cannot_run(Collective collective, ShmWay way, const shm::HostSlots& a, size_t bytes) {
  // A reduce_scatter's posts hold every block together (shm_reduce_scatter);
  // the table counts one block.
  if (collective == Collective::kReduceScatter) bytes *= static_cast<size_t>(a.local_size());
  return why_way_cannot_run(collective, way, shm_call_facts(a, bytes));
}

namespace {
using namespace shm_direct_internal;  // NOLINT: the helpers of every direct collective
}  // namespace

Status shm_barrier(AlgoContext& c, shm::HostSlots& a) {
  const auto mine = op_stamp(c, Collective::kBarrier, -1, 0);
  int half;
  Status st = next_half(c, a, true, &half);
  if (!st.ok()) return st;
  a.stamp(half, mine);
  st = arrive_and_wait_all(c, a);
  if (st.ok()) st = check_stamps(a, -1, half, mine, c.what);
  release(a, half, a.arrivals() + 1);
  return st;
}

}  // namespace cohort
