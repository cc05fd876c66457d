#include "transport/shm/symmetric.h"

#include "transport/shm/shared_segment.h"

#include <algorithm>
#include <string>

#include "cohort/errors.h"
#include "transport/shm/arena.h"

namespace cohort::shm {

constexpr size_t kSymmetricPage = 4096;

size_t symmetric_region_bytes(size_t bytes) {
  return std::max<size_t>(kSymmetricPage, (bytes + kSymmetricPage - 1) / kSymmetricPage * kSymmetricPage);
}

void SymmetricRegistry::add(uint64_t id, std::shared_ptr<ShmSegment> segment, size_t region_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back(Entry{id, std::move(segment), region_bytes});
}

void SymmetricRegistry::remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; }),
                 entries_.end());
}

SymmetricRegistry::Place SymmetricRegistry::place_of(int me, const void* address, size_t bytes) const {
  const auto* at = static_cast<const uint8_t*>(address);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    const auto* region =
        static_cast<const uint8_t*>(e.segment->data()) + static_cast<size_t>(me) * e.region_bytes;
    if (at >= region && at + bytes <= region + e.region_bytes) {
      return Place{e.id, static_cast<uint64_t>(at - region)};
    }
  }
  return Place{};
}

uint8_t* SymmetricRegistry::region_of(int q, uint64_t id, uint64_t offset, size_t bytes,
                                      std::shared_ptr<ShmSegment>* hold) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.id != id) continue;
    // A peer's table is not trusted to stay inside the block.
    if (offset > e.region_bytes || bytes > e.region_bytes - offset) return nullptr;
    const size_t start = static_cast<size_t>(q) * e.region_bytes;
    if (start + e.region_bytes > e.segment->size()) return nullptr;
    *hold = e.segment;
    return static_cast<uint8_t*>(e.segment->data()) + start + offset;
  }
  return nullptr;
}

bool SymmetricRegistry::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.empty();
}

Result<std::shared_ptr<ShmSegment>> map_symmetric(Store& store, const Arena& arena, uint64_t id,
                                                  size_t region_bytes, Deadline deadline) {
  const std::vector<int>& local = arena.local_ranks();
  const int leader = local.front();
  const int me = local[static_cast<size_t>(arena.local_index())];
  const size_t total = region_bytes * local.size();
  const std::string key = "symmetric/" + std::to_string(id) + "/" + std::to_string(leader) + "/";
  SegmentPlan plan;
  plan.key = key;
  plan.ranks = local;
  plan.me = me;
  plan.bytes = total;
  plan.what = "symmetric memory";
  auto shared = share_segment(store, plan, deadline);
  if (!shared.ok()) return shared.status();
  return std::make_shared<ShmSegment>(std::move(shared.value()));
}

}  // namespace cohort::shm
