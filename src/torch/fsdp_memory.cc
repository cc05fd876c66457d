// FSDP's memory for whole parameters and reduced gradients (fsdp_memory.h).
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

// Kept: the blocks freed for reuse, by use.
struct Kept {
  std::mutex mu;
  std::vector<Mapping*> wholes;     // at most kKeptBlocks
  std::vector<Mapping*> gradients;  // every one freed since the last release
};
Kept& kept() {
  static Kept* k = new Kept;  // never destroyed: tensors may free blocks during static destruction
  return *k;
}

// give_back_whole keeps a whole parameter's block; beyond kKeptBlocks the
// smallest goes.
void give_back_whole(void* ctx) {
  auto* m = static_cast<Mapping*>(ctx);
  Mapping* unmap = nullptr;
  {
    std::lock_guard<std::mutex> lock(kept().mu);
    auto& blocks = kept().wholes;
    blocks.push_back(m);
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

void give_back_gradient(void* ctx) {
  std::lock_guard<std::mutex> lock(kept().mu);
  kept().gradients.push_back(static_cast<Mapping*>(ctx));
}

void unmap_deleter(void* ctx) {
  unmap_block(static_cast<Mapping*>(ctx));
}

// take_kept: the smallest of `blocks` that holds `bytes`, if any.
Mapping* take_kept(std::vector<Mapping*>& blocks, size_t bytes) {
  std::lock_guard<std::mutex> lock(kept().mu);
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

c10::DataPtr allocate(size_t bytes, Use use) {
  if (bytes < kHugePage) return c10::GetAllocator(c10::DeviceType::CPU)->allocate(bytes);
  Mapping* m = nullptr;
  c10::DeleterFnPtr deleter = &unmap_deleter;
  if (use == Use::kWholeParameter) {
    m = take_kept(kept().wholes, bytes);
    deleter = &give_back_whole;
  } else if (use == Use::kReducedGradient) {
    m = take_kept(kept().gradients, bytes);
    deleter = &give_back_gradient;
  }
  if (!m) m = map_block(bytes);
  if (!m) return c10::GetAllocator(c10::DeviceType::CPU)->allocate(bytes);
  return c10::DataPtr(m->start, m, deleter, c10::Device(c10::DeviceType::CPU));
}

void release_kept() {
  std::vector<Mapping*> blocks;
  {
    std::lock_guard<std::mutex> lock(kept().mu);
    blocks.swap(kept().wholes);
    blocks.insert(blocks.end(), kept().gradients.begin(), kept().gradients.end());
    kept().gradients.clear();
  }
  for (Mapping* m : blocks) unmap_block(m);
}

size_t kept_bytes() {
  std::lock_guard<std::mutex> lock(kept().mu);
  size_t total = 0;
  for (const Mapping* m : kept().wholes) total += m->mapped;
  for (const Mapping* m : kept().gradients) total += m->mapped;
  return total;
}

}  // namespace cohort::fsdp_memory
