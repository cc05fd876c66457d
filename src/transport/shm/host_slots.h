// host_slots.h (shm): the shared memory of a group's ranks on one host,
// as the direct algorithms (algorithms/shm_direct*.cc) see it: who is
// here, per rank an arrival counter and two slots with their stamps,
// reads of another rank's memory, and the host's symmetric allocations.
// Nothing of rings, segments or their set-up: the arena (arena.h), which
// is one, adds those for the links.
//
// A rank copies its part into its own slot and counts one arrival; the
// others read the slot once its counter is far enough along. Waiting on
// counters spins briefly, then yields, then sleeps on a futex in slices
// (common/spin.h's QuietSpell), checking the deadline and the peers'
// health between slices.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "transport/shm/symmetric.h"

namespace cohort::shm {

struct ArenaHeader;
struct RankControl;

class HostSlots {
 public:
  virtual ~HostSlots() = default;

  int local_size() const { return static_cast<int>(local_ranks_.size()); }
  int local_index() const { return me_; }
  const std::vector<int>& local_ranks() const { return local_ranks_; }
  // local_index_of returns a group rank's index here, or -1 on another host.
  int local_index_of(int group_rank) const;

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
  // (process_vm_readv; seccomp or Yama may forbid it) and, unless
  // COHORT_SHM_SINGLE_COPY_BYTES forces it, the kernel copies fast enough
  // (kernel_copy.h), large broadcasts, all_gathers and all_to_alls read
  // each other's buffers directly instead of copying through the slots.
  // single_copy_from is the size per rank from which to do so (SIZE_MAX:
  // never); by default kAutoSingleCopyFrom, where reading in place won
  // by 2x at 2 ranks (2026-12-05, docs/performance.md).
  static constexpr size_t kAutoSingleCopyFrom = size_t{32} << 10;
  size_t single_copy_from() const { return single_copy_ ? single_copy_from_ : SIZE_MAX; }
  // single_copy: the host's ranks may read each other's buffers at all.
  bool single_copy() const { return single_copy_; }
  // single_copy_size_told: COHORT_SHM_SINGLE_COPY_BYTES gave the size
  // (else it is kAutoSingleCopyFrom, and a collective may read in place
  // below it where it measured faster: shm_ways.h).
  bool single_copy_size_told() const { return single_copy_size_told_; }
  // oversubscribed is true when this host's ranks outnumber the CPUs they
  // may run on, all their affinities together.
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

  // Posts: per rank a ring of kPosts cells of up to kPostBytes each, for
  // small broadcasts. A root writes the next cell of its ring, stamped, and
  // arrives; it waits for its readers only when it is about to write a cell
  // they may not have read yet, kPosts broadcasts later. Through a slot
  // half it could run at most two ahead, and ranks on an oversubscribed
  // host then pass the processor back and forth for every broadcast
  // (Open MPI's eager buffers let its root run far ahead: 0.41 us against
  // cohort's 2.5 us for 4 bytes at 4 ranks on 2 cores, before posts).
  // Up to 16 KiB a post (512 KiB of cells a rank; its slots take 1 MiB by
  // default): at 2 ranks, bound, through posts against through the slots
  // (Intel Xeon VM, 2026-12-06, alternating builds, medians of 3 jobs):
  // 16 KiB all_reduce 3.25 us against 4.11, broadcast 1.00 against 2.04,
  // reduce 0.96 against 3.67, all_gather of 8 KiB a rank 1.86 against
  // 2.08. (4 KiB posts had measured all_gather 0.24-0.26 us against
  // 0.30-0.33 at 4 KiB a rank.)
  static constexpr int kPosts = 32;
  static constexpr size_t kPostBytes = 16384;
  // PostClock is this rank's record of the posts, like SlotClock: how many
  // broadcasts went through posts (the same on every rank, whichever rank
  // was root: a cell index is taken from the count) and, per cell index,
  // after how many arrivals of every rank its readers are done.
  struct PostClock {
    uint64_t posts = 0;
    uint64_t free_after[kPosts] = {};
    // all_to_all_in_posts: the group's last all_to_all had blocks of one
    // size on every rank, small enough for a post; every rank saw every
    // rank's sizes, so all agree whether the next one tries the posts.
    bool all_to_all_in_posts = false;
  };
  PostClock& post_clock() { return post_clock_; }
  // post returns local rank `local`'s cell `cell` (its data, kPostBytes);
  // stamp_post stamps this rank's cell once its data is written (a reader
  // that reads the stamp sees the data); post_stamp_of reads a stamp.
  uint8_t* post(int local, int cell) const;
  void stamp_post(int cell, const Stamp& stamp);
  Stamp post_stamp_of(int local, int cell) const;

  // symmetric lists this host's symmetric allocations of the group
  // (symmetric.h); shared with the allocations' owners, which may outlive
  // the arena.
  const std::shared_ptr<SymmetricRegistry>& symmetric() const { return symmetric_; }

 protected:
  HostSlots() = default;
  RankControl& control(int local) const;
  uint64_t count_of(int local) const;
  // ready is count_of(local) >= target, remembering what every rank reached.
  bool ready(int local, uint64_t target);

  // Set by the arena when it maps its segment.
  std::vector<int> local_ranks_;
  int me_ = -1;
  size_t slot_bytes_ = 0;
  ArenaHeader* header_ = nullptr;
  uint8_t* base_ = nullptr;
  size_t controls_at_ = 0, slots_at_ = 0, posts_at_ = 0;
  bool single_copy_ = false;
  size_t single_copy_from_ = SIZE_MAX;
  bool single_copy_size_told_ = false;
  bool oversubscribed_ = false;  // more local ranks than their CPUs: yield, do not spin
  int64_t spin_us_ = 0;

 private:
  SlotClock clock_;
  PostClock post_clock_;
  std::shared_ptr<SymmetricRegistry> symmetric_ = std::make_shared<SymmetricRegistry>();
  uint64_t all_seen_ = 0;  // every local rank has arrived at least this often
  // arrived_ is this rank's arrival count, kept here as well as on its
  // line: the rank never reads its own line on the way of an operation.
  // Once a peer has read the line, reading it here can be a cross-core
  // miss: in the machine's slow minutes `perf` showed this rank's read of
  // its own count stalling after each wait, and without those reads the
  // 2-rank 4-byte all_reduce went from 0.475 to 0.325 us.
  uint64_t arrived_ = 0;
};

}  // namespace cohort::shm
