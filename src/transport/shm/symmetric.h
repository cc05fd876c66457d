// symmetric.h: symmetric memory, one block per rank of a host, mapped by
// every rank of that host.
//
// A symmetric allocation is one shared-memory segment per (group, host) cut
// into equal regions, region i being local rank i's block. Every local rank
// maps the whole segment, so a rank reads (and may write) the others'
// blocks with plain loads and stores: no system call, no page pinning and
// no copy into a slot and out again, which collectives on ordinary memory
// pay. all_reduce finds out that a buffer lies in such a block through the
// registry below; the ranks then tell each other, in a table of pieces
// each publishes in its first slot, which allocation and offset each piece
// is at (algorithms/shm_direct_reduce.cc).
//
// Allocations are numbered by the group (the k-th collective allocation of
// a group has number k on every rank), so a number names the same segment
// on every rank that still holds it. Unless every rank's pieces lie at the
// same places of the same allocations, the data goes through the slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/shm_segment.h"
#include "common/status.h"

namespace cohort::shm {

class Arena;

// SymmetricRegistry lists the live symmetric allocations of one arena. The
// thread that allocates adds, the owner's last reference removes, and the
// thread running a collective looks up: every member takes mu_.
class SymmetricRegistry {
 public:
  // Where a range of this rank's memory lies in a symmetric allocation.
  struct Place {
    uint64_t id = 0;  // 0: in none
    uint64_t offset = 0;
  };
  void add(uint64_t id, std::shared_ptr<ShmSegment> segment, size_t region_bytes);
  void remove(uint64_t id);
  // place_of finds [address, address + bytes) inside local rank `me`'s
  // region of one allocation.
  Place place_of(int me, const void* address, size_t bytes) const;
  // region_of returns local rank `q`'s block of allocation `id` at `offset`
  // as mapped here, if `bytes` from there stay inside it; null where this
  // rank holds no such allocation. `*hold` keeps the mapping alive while the
  // caller reads it, even if its owner frees the allocation meanwhile.
  uint8_t* region_of(int q, uint64_t id, uint64_t offset, size_t bytes,
                     std::shared_ptr<ShmSegment>* hold) const;
  bool empty() const;

 private:
  struct Entry {
    uint64_t id;
    std::shared_ptr<ShmSegment> segment;
    size_t region_bytes;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

// map_symmetric makes (the host's lowest rank) or opens (the others)
// allocation `id` of `region_bytes` per local rank, through `store` (the
// group's), and unlinks its name once every local rank has mapped it.
// Every local rank of `arena` must call it with the same id and size.
Result<std::shared_ptr<ShmSegment>> map_symmetric(Store& store, const Arena& arena, uint64_t id,
                                                  size_t region_bytes, Deadline deadline);

// symmetric_region_bytes rounds a block up to whole pages (and at least
// one), so that every rank's block starts on a page.
size_t symmetric_region_bytes(size_t bytes);

}  // namespace cohort::shm
