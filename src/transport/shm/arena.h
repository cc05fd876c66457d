// arena.h: the shared-memory segment of one group's ranks on one host.
//
// One segment per (group, host), made by the host's lowest rank and opened
// by the others through the group's store; its name is unlinked as soon as
// every local rank has mapped it. It holds:
//  - a ring per ordered pair of local ranks (ring.h), which carry messages;
//  - per rank, an arrival counter and two slots, which the direct
//    algorithms use through the narrower HostSlots (host_slots.h), the
//    arena's base: they never see the rings or the segment.
// Beside the segment, each rank's doorbell and its peers' pidfds
// (peer_signals.h), which its ring links use instead of a connection.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/shm_segment.h"
#include "common/status.h"
#include "transport/shm/arena_fit.h"
#include "transport/shm/host_slots.h"
#include "transport/shm/peer_signals.h"
#include "transport/shm/ring.h"

namespace cohort::shm {

class Arena : public HostSlots {
 public:
  // set_up builds the arena of `local_ranks` (group ranks on this host,
  // ascending, `rank` among them) through `store`; `outnumbered`: they may
  // use fewer CPUs than there are of them (from the published places, so
  // alike on every rank), and waits yield the CPU from the start. Every
  // local rank gets the same answer: an arena, or an error (and then all
  // use TCP).
  static Result<std::unique_ptr<Arena>> set_up(Store& store, int rank, const std::vector<int>& local_ranks,
                                               bool outnumbered, Deadline deadline);
  ~Arena() override;

  // ring returns the ring from local rank `from` to local rank `to`.
  Ring ring(int from, int to) const;
  // sleeping is set while local rank `local` sleeps in poll(2) and wants a
  // byte on its doorbell when a ring to or from it moves.
  std::atomic<uint32_t>& sleeping(int local) const;
  // signals wake the host's ranks and tell when one died (peer_signals.h).
  const PeerSignals& signals() const { return signals_; }

 private:
  Arena() = default;
  // share_host_facts tells the host's ranks, through the store, whether
  // this one can read the others' memory (single copy) and whether it
  // wakes and watches them (`watching`); sets single_copy_ from all their
  // answers, and answers whether every rank wakes and watches its peers.
  bool share_host_facts(Store& store, const std::string& key, const Status& watching,
                        std::chrono::milliseconds timeout);
  // lay_out takes the sizes and offsets of the segment's parts.
  void lay_out(const ArenaLayout& layout);

  ShmSegment segment_;
  PeerSignals signals_;
  size_t ring_bytes_ = 0;
  size_t ring_controls_at_ = 0, rings_at_ = 0;
  uint64_t probe_word_ = 0x31414d5348434f43ull;  // what peers read to test single copy
};

}  // namespace cohort::shm
