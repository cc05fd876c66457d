// FSDP's memory for whole parameters (fsdp_memory.h).
#include "torch/fsdp_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

namespace cohort::fsdp_memory {
namespace {

constexpr size_t kHugePage = 2u << 20;

// Mapping is one block: the whole mapping (unaligned) and the huge-page
// aligned start handed out.
struct Mapping {
  void* base;
  size_t mapped;
  uint8_t* start;
  size_t usable;  // from start to the mapping's end
};

Mapping* map_block(size_t bytes) {
  const size_t mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage + kHugePage;  // room to align
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  auto* start =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) / kHugePage * kHugePage);
  const size_t usable = mapped - static_cast<size_t>(start - static_cast<uint8_t*>(base));
  ::madvise(start, usable, MADV_HUGEPAGE);  // a hint: without huge pages the block still works
  return new Mapping{base, mapped, start, usable};
}

void unmap_block(Mapping* m) {
  ::munmap(m->base, m->mapped);
  delete m;
}

// Kept: the blocks given back for reuse, the smallest first out.
struct Kept {
  std::mutex mu;
  std::vector<Mapping*> blocks;
};
Kept& kept() {
  static Kept* k = new Kept;  // never destroyed: tensors may free blocks during static destruction
  return *k;
}

void give_back(void* ctx) {
  auto* m = static_cast<Mapping*>(ctx);
  Mapping* unmap = m;
  {
    std::lock_guard<std::mutex> lock(kept().mu);
    auto& blocks = kept().blocks;
    blocks.push_back(m);
    unmap = nullptr;
    if (blocks.size() > kKeptBlocks) {
      auto smallest = std::min_element(blocks.begin(), blocks.end(), [](const Mapping* a, const Mapping* b) {
        return a->usable < b->usable;
      });
      unmap = *smallest;
      blocks.erase(smallest);
    }
  }
  if (unmap) unmap_block(unmap);
}

void unmap_deleter(void* ctx) {
  unmap_block(static_cast<Mapping*>(ctx));
}

// take_kept: the smallest kept block that holds `bytes`, if any.
Mapping* take_kept(size_t bytes) {
  std::lock_guard<std::mutex> lock(kept().mu);
  auto& blocks = kept().blocks;
  auto best = blocks.end();
  for (auto it = blocks.begin(); it != blocks.end(); ++it) {
    if ((*it)->usable >= bytes && (best == blocks.end() || (*it)->usable < (*best)->usable)) best = it;
  }
  if (best == blocks.end()) return nullptr;
  Mapping* m = *best;
  blocks.erase(best);
  return m;
}

}  // namespace

c10::DataPtr allocate(size_t bytes, bool reusable) {
  if (bytes < kHugePage) return c10::GetAllocator(c10::DeviceType::CPU)->allocate(bytes);
  Mapping* m = reusable ? take_kept(bytes) : nullptr;
  if (!m) m = map_block(bytes);
  if (!m) return c10::GetAllocator(c10::DeviceType::CPU)->allocate(bytes);
  return c10::DataPtr(m->start, m, reusable ? &give_back : &unmap_deleter, c10::Device(c10::DeviceType::CPU));
}

void release_kept() {
  std::vector<Mapping*> blocks;
  {
    std::lock_guard<std::mutex> lock(kept().mu);
    blocks.swap(kept().blocks);
  }
  for (Mapping* m : blocks) unmap_block(m);
}

size_t kept_bytes() {
  std::lock_guard<std::mutex> lock(kept().mu);
  size_t total = 0;
  for (const Mapping* m : kept().blocks) total += m->mapped;
  return total;
}

}  // namespace cohort::fsdp_memory
