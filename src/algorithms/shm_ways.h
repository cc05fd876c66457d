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
};

// shm_way_by_rule: the way the rule takes `collective` for `facts`.
ShmWay shm_way_by_rule(Collective collective, const ShmCallFacts& facts);
// why_way_cannot_run: "" when `way` can run `collective` for `facts`,
// else why not ("the posts hold 16384 bytes; this call has 65536").
std::string why_way_cannot_run(Collective collective, ShmWay way, const ShmCallFacts& facts);
// describe_shm_ways: the list as cohort-info prints it under a one-host table.
std::string describe_shm_ways();

}  // namespace cohort
