// shm_ways.h: the ways a one-host collective goes through shared memory,
// in one list: the second level of the algorithm table.
//
// The table (selection.h) chooses shm_direct for a group on one host; the
// collective then goes one of a few ways (through the posts, reading the
// others' buffers in place, through the slots, ...). Which one is taken
// by a rule measured on this machine, not by the cost model: the ways
// differ in how the host's caches and the kernel's copy behave, which the
// model's latency and rate do not see (the measurements are beside each
// rule in shm_ways.cc). Each rule is an entry here, so that cohort-info
// prints them, docs/collectives.md can name them, and COHORT_ALGO can
// force a way as "shm_direct.WAY" (broadcast:64K-:shm_direct.slots); a
// forced way that cannot run a call is refused before the call starts,
// naming why. Adding a way: its code in shm_direct_*.cc, its entries in
// shm_ways.cc (rule and refusal), a case where the collective switches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/collective.h"

namespace cohort {

enum class ShmWay : uint8_t {
  kByRule,   // not forced: the collective's rule (shm_way_by_rule) decides
  kStamp,    // all_reduce of a word at most, carried in the arrival stamp
  kPosts,    // small data in one step through the posts (host_slots.h)
  kInPlace,  // the others' buffers read in place (process_vm_readv)
  kSlots,    // chunks through two slots a rank: any size
};

// ShmWayEntry: one way of one collective and the rule that takes it.
struct ShmWayEntry {
  Collective collective;
  ShmWay way;
  const char* when;  // the rule, for cohort-info and docs
  // forceable: COHORT_ALGO may force it. all_to_all's ways are agreed by
  // the host's ranks at each call from their block sizes, which may
  // differ between ranks, so no single rank can force one.
  bool forceable = true;
};

// shm_way_registry: every way of every collective, in the order a rule tries them.
const std::vector<ShmWayEntry>& shm_way_registry();
const char* shm_way_name(ShmWay way);  // "posts", as COHORT_ALGO writes it
bool parse_shm_way(const std::string& name, ShmWay* out);
// shm_ways_of: the names of `collective`'s forceable ways ("posts, in_place, slots").
std::string shm_ways_of(Collective collective);

// ShmCallFacts: what a rule and a refusal read of one call and its host.
struct ShmCallFacts {
  // bytes: the buffer (broadcast, reduce, all_reduce), the largest
  // block (all_gather) or every block together (reduce_scatter: what
  // the posts must hold).
  size_t bytes = 0;
  bool single_copy = false;            // the host's ranks may read each other's memory
  size_t single_copy_from = SIZE_MAX;  // from this size per rank they do, by the host's rule
  bool oversubscribed = false;         // the host's ranks outnumber their CPUs
  bool single_copy_size_told = false;  // COHORT_SHM_SINGLE_COPY_BYTES set single_copy_from
};

// The rules' sizes, each with what measured it. Inline, with the rules:
// a call asks for its way on the path of the smallest collectives.
namespace shm_rules {

// The posts' size (host_slots.h: HostSlots::kPostBytes, checked in shm_ways.cc).
inline constexpr size_t kShmPostBytes = 16384;

// A reduce_scatter goes through the posts up to a post in all (16 KiB),
// where each rank has a core: at 2 ranks, bound, 2-16 KiB in all took
// 0.70-2.08 us against 0.81-2.32 through the slots (1.11-1.24x; Intel Xeon
// VM, 2026-12-06, alternating builds, medians of 5 jobs). Where the ranks
// outnumber the cores, only up to 1 KiB: at 4 ranks on 2 cores, 2-4 KiB
// in all took 1.2x as long through the posts (medians of 6 jobs that
// spread by 1.5x).
inline constexpr size_t kOversubscribedPostReduceScatterBytes = 1024;

// A broadcast reads the root's buffer in place only below this: from
// there the slots' pipeline, where the root copies one chunk while the
// others copy the last, beats one copy by the kernel (2 ranks, 2026-12-05:
// 1 MiB 49 against 62 us, 2 MiB 173 against 150, 4 MiB 383-449 against
// 307-314).
inline constexpr size_t kBroadcastReadsBelow = size_t{2} << 20;

// reads_in_place: the host's rule for reading in place (host_slots.h:
// from its single-copy size, and not where the ranks outnumber their
// CPUs: there every rank of an in-place broadcast or all_gather waits for
// all at its start and end, where the slots let a writer run ahead; 4
// ranks on 2 cores, 2026-12-06: 1.6-1.8x as long for a broadcast of 256
// KiB-1 MiB, 1.2x for an all_gather of 4 MiB).
inline bool reads_in_place(const ShmCallFacts& f) {
  return !f.oversubscribed && f.bytes >= f.single_copy_from;
}

// An all_gather's blocks that fit a post are read in place from here
// instead, where the host's single-copy size is its default and each rank
// has a CPU: at 2 ranks, bound, 8 KiB a rank took 1.49 us in place
// against 1.61 through the posts, 16 KiB 2.06 against 2.71; 4 KiB 1.26
// against 0.82 (AMD EPYC VM, 2026-12-07, 5 alternating jobs each of
// cohort-bench all_gather -b 4K -e 32K -f 2 -n 2000 -R 3 --spawn 2, the
// way forced by COHORT_ALGO). A broadcast stays in the posts: there the
// posts won at every size up to 16 KiB (0.87 against 1.30 us). An
// all_to_all offers to read in place from here too, on the same terms: at
// 2 ranks 16 KiB blocks took 2.03 us against 3.05 through the slots (4
// jobs each, COHORT_SHM_SINGLE_COPY_BYTES=8192 against its default); where
// 4 ranks share 2 cores, 8-16 KiB blocks took 1.2x as long in place.
inline constexpr size_t kSmallBlocksInPlaceFrom = 8192;

inline bool reads_small_blocks_in_place(const ShmCallFacts& f) {
  return f.single_copy && !f.single_copy_size_told && !f.oversubscribed && f.bytes >= kSmallBlocksInPlaceFrom;
}

// all_to_all_offers_in_place: an all_to_all of blocks of `f.bytes` offers
// to read the others' buffers in place (its ranks agree at the call), from
// the host's single-copy size even where the ranks outnumber their cores:
// through the slots every chunk of every block passes a meeting of all
// ranks, and there reading in place wins (1.14-1.36x at 256 KiB-16 MiB;
// docs/performance.md); and from kSmallBlocksInPlaceFrom as all_gather.
inline bool all_to_all_offers_in_place(const ShmCallFacts& f) {
  return (f.single_copy && f.bytes >= f.single_copy_from) || reads_small_blocks_in_place(f);
}

inline size_t post_limit(Collective collective, const ShmCallFacts& f) {
  if (collective == Collective::kReduceScatter && f.oversubscribed)
    return kOversubscribedPostReduceScatterBytes;
  return kShmPostBytes;
}

}  // namespace shm_rules

// shm_way_by_rule: the way the rule takes `collective` for `f`.
inline ShmWay shm_way_by_rule(Collective collective, const ShmCallFacts& f) {
  switch (collective) {
    case Collective::kAllReduce:
      return f.bytes <= sizeof(uint64_t)           ? ShmWay::kStamp
             : f.bytes <= shm_rules::kShmPostBytes ? ShmWay::kPosts
                                                   : ShmWay::kSlots;
    case Collective::kReduce:
      return f.bytes <= shm_rules::kShmPostBytes ? ShmWay::kPosts : ShmWay::kSlots;
    case Collective::kBroadcast:
      if (f.bytes <= shm_rules::kShmPostBytes) return ShmWay::kPosts;
      return f.bytes < shm_rules::kBroadcastReadsBelow && shm_rules::reads_in_place(f) ? ShmWay::kInPlace
                                                                                       : ShmWay::kSlots;
    case Collective::kAllGather:
      if (shm_rules::reads_small_blocks_in_place(f)) return ShmWay::kInPlace;
      if (f.bytes <= shm_rules::kShmPostBytes) return ShmWay::kPosts;
      return shm_rules::reads_in_place(f) ? ShmWay::kInPlace : ShmWay::kSlots;
    case Collective::kReduceScatter:
      return f.bytes <= shm_rules::post_limit(collective, f) ? ShmWay::kPosts : ShmWay::kSlots;
    default:
      return ShmWay::kSlots;
  }
}
// why_way_cannot_run: "" when `way` can run `collective` for `facts`,
// else why not ("the posts hold 16384 bytes; this call has 65536").
std::string why_way_cannot_run(Collective collective, ShmWay way, const ShmCallFacts& facts);
// describe_shm_ways: the list as cohort-info prints it under a one-host table.
std::string describe_shm_ways();

}  // namespace cohort
