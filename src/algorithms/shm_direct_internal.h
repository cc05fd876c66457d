// shm_direct_internal.h: private to the direct collectives (shm_direct*.cc):
// the waiting, slot-half, post and stamp helpers they all run.
//
// Why a header: the collectives live in one file per kind (reduce, gather
// and scatter, all-to-all) and these helpers run once per chunk or per
// small operation. Defined inline here, they compile into each collective
// as they did when all lived in one file: no call across files on the fast
// path. What runs only when a rank must wait or something went wrong
// (check_peers, wait_until_slow, stamps_differ) stays out of line, in
// shm_direct.cc.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "algorithms/choice_log.h"
#include "algorithms/shm_direct.h"
#include "common/spin.h"

namespace cohort::shm_direct_internal {

// check_peers takes in what the peers sent and fails if one of the local
// ranks named by `who` (-1: every one) closed its connection before having
// arrived `target` times: it will not come, since its process exited or it
// destroyed its group.
Status check_peers(AlgoContext& c, shm::HostSlots& a, int who, uint64_t target);

// wait_until returns once local rank `who` (-1: every local rank) has
// arrived `target` times; a dead peer, abort() or the deadline end it.
Status wait_until_slow(AlgoContext& c, shm::HostSlots& a, int who, uint64_t target);
inline Status wait_until(AlgoContext& c, shm::HostSlots& a, int who, uint64_t target) {
  // Often there is nothing to wait for: then no service is built.
  if (a.arrived(who, target)) return Status::ok_status();
  return wait_until_slow(c, a, who, target);
}

// note_way logs, with COHORT_DEBUG=info, which way a direct collective
// went ("through the posts"), once per collective and way: the table
// chose shm_direct, and these are its own choices.
inline void note_way(AlgoContext& c, Collective collective, const char* way) {
  if (c.choices) c.choices->note_way(collective, way, c.what);
}

// next_half picks the slot half of the next chunk and, for a rank about to
// write into it, waits until its previous readers are done.
inline Status next_half(AlgoContext& c, shm::HostSlots& a, bool writes, int* half) {
  auto& clock = a.slot_clock();
  *half = static_cast<int>(clock.chunks++ & 1);
  if (!writes) return Status::ok_status();
  return wait_until(c, a, -1, clock.free_after[*half]);
}

// release records that the readers of `half` are done once every rank has
// arrived `after` times.
inline void release(shm::HostSlots& a, int half, uint64_t after) {
  a.slot_clock().free_after[half] = after;
}

// Arrive, then wait for everyone to have arrived as often.
inline Status arrive_and_wait_all(AlgoContext& c, shm::HostSlots& a) {
  a.arrive();
  return wait_until(c, a, -1, a.arrivals());
}

// end_single_copy keeps every rank in the op until all are done with the
// others' buffers (read them, or written into them), which each caller may
// change as soon as it returns.
inline Status end_single_copy(AlgoContext& c, shm::HostSlots& a, int half) {
  Status st = arrive_and_wait_all(c, a);
  release(a, half, a.arrivals());
  return st;
}

// way_of: the way `collective` goes for `bytes` (as shm_ways.h counts
// them): the one COHORT_ALGO forced, else its rule's.
inline ShmWay way_of(const AlgoContext& c, const shm::HostSlots& a, Collective collective, size_t bytes) {
  return c.way != ShmWay::kByRule ? c.way : shm_way_by_rule(collective, shm_call_facts(a, bytes));
}

// read_peer reads from local rank `q`'s buffer; when that fails (the peer
// left the operation), the reason it left, which it sent before leaving,
// is the better error.
Status read_peer(AlgoContext& c, shm::HostSlots& a, int q, void* into, uint64_t address, size_t bytes);

// op_stamp names an operation for the desync check.
inline shm::HostSlots::Stamp op_stamp(const AlgoContext& c, Collective collective, int root, uint64_t bytes) {
  return shm::HostSlots::Stamp{
      c.sequence, bytes, static_cast<uint32_t>(collective) << 16 | static_cast<uint32_t>(root & 0xFFFF)};
}

// check_stamp compares `theirs`, what local rank `q` runs, with `mine`;
// stamps_differ (shm_direct.cc) says how they differ.
Status stamps_differ(const shm::HostSlots& a, int q, shm::HostSlots::Stamp theirs,
                     const shm::HostSlots::Stamp& mine, const std::string& what);
inline Status check_stamp(const shm::HostSlots& a, int q, const shm::HostSlots::Stamp& theirs,
                          const shm::HostSlots::Stamp& mine, const std::string& what) {
  if (theirs.sequence == mine.sequence && theirs.op == mine.op && theirs.bytes == mine.bytes) {
    return Status::ok_status();
  }
  return stamps_differ(a, q, theirs, mine, what);
}

// check_stamps compares what local rank `who` (-1: every one) runs in
// `half` with this rank's `mine`, after waiting for their arrival there.
inline Status check_stamps(shm::HostSlots& a, int who, int half, const shm::HostSlots::Stamp& mine,
                           const std::string& what) {
  for (int q = 0; q < a.local_size(); ++q) {
    if ((who >= 0 && q != who) || q == a.local_index()) continue;
    Status st = check_stamp(a, q, a.stamp_of(q, half), mine, what);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

// Posts (host_slots.h): each rank's ring of kPosts small cells. An
// operation of up to kPostBytes per rank takes the next cell index on every
// rank (the clock counts alike everywhere); a rank writes its part into its
// own cell and goes on; those that need it read it once it is there. A
// rank waits for readers only to reuse a cell, kPosts operations later, so
// a writer may run far ahead (Open MPI's eager sends let it do the same).

// next_post takes the next cell index; a rank about to write into its cell
// waits until that cell's readers of kPosts operations ago are done.
inline Status next_post(AlgoContext& c, shm::HostSlots& a, bool writes, int* cell) {
  auto& clock = a.post_clock();
  *cell = static_cast<int>(clock.posts++ % shm::HostSlots::kPosts);
  if (!writes) return Status::ok_status();
  return wait_until(c, a, -1, clock.free_after[*cell]);
}

// publish_post writes `bytes` of `data` into this rank's cell, then its
// stamp: a reader that sees the stamp sees the data.
inline void publish_post(shm::HostSlots& a, int cell, const shm::HostSlots::Stamp& mine, const void* data,
                         size_t bytes) {
  if (bytes) std::memcpy(a.post(a.local_index(), cell), data, bytes);
  a.stamp_post(cell, mine);
}

// await_post returns once local rank q's cell holds its part of `mine`'s
// operation, checked against `mine`: once q has `arrivals` arrivals, the
// count it reaches by arriving after it posted. A writer ahead of this
// rank has stamped the cell already: then its count, a cache line it
// keeps writing, is not read at all.
// With same_bytes false the stamps' sizes may differ (the caller compares
// them); their operation and sequence must still agree.
inline Status await_post(AlgoContext& c, shm::HostSlots& a, int q, int cell,
                         const shm::HostSlots::Stamp& mine, uint64_t arrivals, bool same_bytes = true) {
  auto theirs = a.post_stamp_of(q, cell);
  // A peer about to post (the usual case in an exchange, where all post at
  // once) is watched on its cell's line, which then brings stamp and data
  // in one miss; through its count that takes two. Briefly, and only with
  // a core per rank: else the peer may need this one.
  for (int i = 0; i < 2048 && theirs.sequence != mine.sequence && !a.oversubscribed(); ++i) {
    cpu_relax();
    theirs = a.post_stamp_of(q, cell);
  }
  if (theirs.sequence != mine.sequence) {
    Status st = wait_until(c, a, q, arrivals);
    if (!st.ok()) return st;
    theirs = a.post_stamp_of(q, cell);
  }
  if (!same_bytes && theirs.sequence == mine.sequence && theirs.op == mine.op) return Status::ok_status();
  return check_stamp(a, q, theirs, mine, c.what);
}

// One-way operations (broadcast, reduce): the writers post and arrive; the
// readers arrive once they have read, so the cell is free again once
// every rank has arrived as often as this rank has now.
// Exchanges (all_gather, reduce_scatter): every rank posts, arrives, then
// reads the others' posts; its arrival says only that its post is there.
// Each has read this operation's posts once it arrives in the next one,
// so the cell is free after one more arrival of every rank (as a slot half
// is, release()).
inline uint64_t one_way_arrival(shm::HostSlots& a) {
  return a.arrivals() + 1;
}
inline void end_one_way(shm::HostSlots& a, int cell) {
  a.arrive();
  a.post_clock().free_after[cell] = a.arrivals();
}
inline void end_exchange(shm::HostSlots& a, int cell) {
  a.post_clock().free_after[cell] = a.arrivals() + 1;
}

// begin_exchange takes this rank's next cell, posts `bytes` of `data` in
// it, stamped, and arrives: from then on the others may read it.
inline Status begin_exchange(AlgoContext& c, shm::HostSlots& a, const shm::HostSlots::Stamp& mine,
                             const void* data, size_t bytes, int* cell) {
  Status st = next_post(c, a, true, cell);
  if (!st.ok()) return st;
  publish_post(a, *cell, mine, data, bytes);
  a.arrive();
  return Status::ok_status();
}

}  // namespace cohort::shm_direct_internal
