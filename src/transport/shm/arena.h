// arena.h: the shared-memory segment of one group's ranks on one host.
//
// One segment per (group, host), made by the host's lowest rank and opened
// by the others through the group's store; its name is unlinked as soon as
// every local rank has mapped it. It holds:
//  - a ring per ordered pair of local ranks (ring.h), which carry messages;
//  - per rank, an arrival counter and two slots, which the direct
//    algorithms (algorithms/shm_direct.cc) use to read each other's data in
//    place: a rank copies its part into its slot, counts one arrival, and
//    the others read the slot once its counter is far enough along.
// Waiting on counters spins briefly, then yields, then sleeps on a futex in
// slices, checking the deadline and the peers' health between slices.
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
#include "transport/shm/ring.h"
#include "transport/shm/symmetric.h"

namespace cohort::shm {

struct ArenaHeader;
struct RankControl;

class Arena {
 public:
  // set_up builds the arena of `local_ranks` (group ranks on this host,
  // ascending, `rank` among them) through `store`. Every local rank gets the
  // same answer: an arena, or an error (and then all use TCP).
  static Result<std::unique_ptr<Arena>> set_up(Store& store, int rank, const std::vector<int>& local_ranks,
                                               Deadline deadline);
  ~Arena();

  int local_size() const { return static_cast<int>(local_ranks_.size()); }
  int local_index() const { return me_; }
  const std::vector<int>& local_ranks() const { return local_ranks_; }
  // local_index_of returns a group rank's index here, or -1 on another host.
  int local_index_of(int group_rank) const;

  // ring returns the ring from local rank `from` to local rank `to`.
  Ring ring(int from, int to) const;
  // sleeping is set while local rank `local` sleeps in poll(2) and wants a
  // doorbell byte on its socket when a ring to or from it moves.
  std::atomic<uint32_t>& sleeping(int local) const;

  // Direct algorithms. arrive counts one more arrival of this rank and
  // wakes sleepers; arrivals() is this rank's count so far.
  void arrive();
  uint64_t arrivals() const { return arrived_; }
  // arrivals_of is local rank `local`'s count.
  uint64_t arrivals_of(int local) const { return count_of(local); }
  // wait_for waits until local rank `local` (or every local rank, for -1)
  // has arrived `target` times. `service(deep)` runs now and then while
  // it waits: cheaply (deep false) every so many spins, so that the
  // caller can keep other traffic moving (point-to-point requests a peer
  // may be waiting for); deeply (true) between sleeps, to check the peers'
  // health; it sets `*busy` while it has traffic of its own in flight, and
  // sleeps are then 1 ms instead of 20. Its error is returned. Fails with
  // kTimeout at `deadline`.
  // arrived tells without waiting whether local rank `local` (or every
  // local rank, for -1) has arrived `target` times.
  bool arrived(int local, uint64_t target) {
    return (local < 0 && target <= all_seen_) || ready(local, target);
  }
  Status wait_for(int local, uint64_t target, Deadline deadline,
                  const std::function<Status(bool deep, bool* busy)>& service, const std::string& what);
  // A Stamp says which operation a rank runs in the chunk that uses a slot
  // half, so that ranks that called different collectives (or sizes) are
  // told so instead of mixing up data. stamp() is written before the
  // rank's arrival in that chunk and read by the others after it.
  struct Stamp {
    uint64_t sequence;
    uint64_t bytes;
    uint32_t op;
    // A word for the operation: the rank's buffer address for single-copy
    // reads, a marker, or the data itself when it fits (a small all_reduce).
    uint64_t word = 0;
  };
  void stamp(int half, const Stamp& stamp);
  Stamp stamp_of(int local, int half) const;
  // slot returns local rank `local`'s slot `half` (0 or 1), slot_bytes long.
  uint8_t* slot(int local, int half) const;
  size_t slot_bytes() const { return slot_bytes_; }

  // Single copy: when every rank here may read the others' memory
  // (process_vm_readv; seccomp or Yama may forbid it), large all_gathers
  // read each other's buffers directly instead of copying through slots.
  // single_copy_from is the size from which to do so (SIZE_MAX: never).
  size_t single_copy_from() const { return single_copy_ ? single_copy_from_ : SIZE_MAX; }
  // oversubscribed is true when this host's ranks outnumber its cores.
  bool oversubscribed() const { return oversubscribed_; }
  // leave records that this rank gives up direct operation `sequence` with
  // an error; left tells whether local rank `local` gave it up. A rank
  // that read another's buffer checks left() afterwards: a rank that left
  // may have freed what was read.
  void leave(uint64_t sequence);
  bool left(int local, uint64_t sequence) const;
  // gone_ranks lists the group ranks on this host whose process no longer
  // runs (exited, or a zombie not yet reaped): shrink_group's suspects when
  // a death was seen only here. wait_for uses the same test.
  std::vector<int> gone_ranks() const;
  // read_from copies `bytes` at `address` in local rank `local`'s process.
  Status read_from(int local, void* into, uint64_t address, size_t bytes) const;

  // SlotClock is this rank's record of its two slots: which one the next
  // chunk uses, and for each how many arrivals every rank must have made
  // before it may be written again (its readers are done by then). All
  // ranks arrive in step, so the numbers are the same on every rank.
  struct SlotClock {
    uint64_t chunks = 0;
    uint64_t free_after[2] = {0, 0};
  };
  SlotClock& slot_clock() { return clock_; }

  // symmetric lists this host's symmetric allocations of the group
  // (symmetric.h); shared with the allocations' owners, which may outlive
  // the arena.
  const std::shared_ptr<SymmetricRegistry>& symmetric() const { return symmetric_; }

 private:
  Arena() = default;
  RankControl& control(int local) const;
  void probe_single_copy(Store& store, const std::string& key, std::chrono::milliseconds timeout);
  uint64_t count_of(int local) const;
  // ready is count_of(local) >= target, remembering what every rank reached.
  bool ready(int local, uint64_t target);

  ShmSegment segment_;
  std::vector<int> local_ranks_;
  int me_ = -1;
  size_t ring_bytes_ = 0;
  size_t slot_bytes_ = 0;
  ArenaHeader* header_ = nullptr;
  uint8_t* base_ = nullptr;
  size_t controls_at_ = 0, ring_controls_at_ = 0, rings_at_ = 0, slots_at_ = 0;
  SlotClock clock_;
  std::shared_ptr<SymmetricRegistry> symmetric_ = std::make_shared<SymmetricRegistry>();
  uint64_t all_seen_ = 0;  // every local rank has arrived at least this often
  // arrived_ is this rank's arrival count, kept here as well as on its
  // line: the rank never reads its own line on the way of an operation.
  // Once a peer has read the line, reading it here can be a cross-core
  // miss: in the machine's slow minutes `perf` showed this rank's read of
  // its own count stalling after each wait, and without those reads the
  // 2-rank 4-byte all_reduce went from 0.475 to 0.325 us.
  uint64_t arrived_ = 0;
  bool single_copy_ = false;
  size_t single_copy_from_ = SIZE_MAX;
  uint64_t probe_word_ = 0x31414d5348434f43ull;  // what peers read to test single copy
  bool oversubscribed_ = false;                  // more local ranks than cores: yield, do not spin
  int64_t spin_us_ = 0;
};

}  // namespace cohort::shm
