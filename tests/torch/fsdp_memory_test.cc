// FSDP's memory for whole parameters and reduced gradients
// (src/torch/fsdp_memory.h): blocks of 2 MiB and more are mappings of
// their own; a whole parameter's block given back is kept (at most
// kKeptBlocks), a gradient's every time, and handed out again to the same
// use, until release_kept.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "torch/fsdp_memory.h"

namespace cohort::testing {
namespace {

constexpr size_t kMiB = 1 << 20;

TEST(FsdpMemory, AGivenBackBlockIsTakenAgainUntilReleased) {
  fsdp_memory::release_kept();
  void* first = nullptr;
  {
    c10::DataPtr block = fsdp_memory::allocate(3 * kMiB, fsdp_memory::Use::kWholeParameter);
    first = block.get();
    std::memset(first, 7, 3 * kMiB);  // it is real, writable memory
    EXPECT_EQ(fsdp_memory::kept_bytes(), 0u);
  }
  EXPECT_GE(fsdp_memory::kept_bytes(), 3 * kMiB) << "a reusable block given back is kept";
  {
    // A smaller request takes the kept block (it fits), with its contents.
    c10::DataPtr again = fsdp_memory::allocate(2 * kMiB, fsdp_memory::Use::kWholeParameter);
    EXPECT_EQ(again.get(), first);
    EXPECT_EQ(static_cast<const unsigned char*>(again.get())[0], 7);
    EXPECT_EQ(fsdp_memory::kept_bytes(), 0u);
  }
  fsdp_memory::release_kept();
  EXPECT_EQ(fsdp_memory::kept_bytes(), 0u) << "the end of backward unmaps every kept block";
}

TEST(FsdpMemory, AtMostTwoBlocksAreKeptTheLargestFirst) {
  fsdp_memory::release_kept();
  {
    std::vector<c10::DataPtr> blocks;
    for (size_t mib : {2, 4, 6}) blocks.push_back(fsdp_memory::allocate(mib * kMiB, fsdp_memory::Use::kWholeParameter));
  }
  // Three given back, two kept: the 4 and 6 MiB ones (each mapped with up
  // to one huge page of room to align it).
  EXPECT_GE(fsdp_memory::kept_bytes(), 10 * kMiB);
  EXPECT_LE(fsdp_memory::kept_bytes(), 10 * kMiB + 2 * 2 * kMiB + 2 * 2 * kMiB);
  fsdp_memory::release_kept();
}

TEST(FsdpMemory, SmallAndOwnBlocksAreNeverKept) {
  fsdp_memory::release_kept();
  {
    c10::DataPtr small = fsdp_memory::allocate(64 * 1024, fsdp_memory::Use::kWholeParameter);
    c10::DataPtr small_gradient = fsdp_memory::allocate(64 * 1024, fsdp_memory::Use::kReducedGradient);
    c10::DataPtr own = fsdp_memory::allocate(4 * kMiB, fsdp_memory::Use::kOwn);
    ASSERT_NE(small.get(), nullptr);
    ASSERT_NE(small_gradient.get(), nullptr);
    ASSERT_NE(own.get(), nullptr);
  }
  EXPECT_EQ(fsdp_memory::kept_bytes(), 0u);
}

TEST(FsdpMemory, EveryFreedGradientIsKeptForTheNextGradientOnly) {
  fsdp_memory::release_kept();
  std::vector<void*> freed;
  {
    std::vector<c10::DataPtr> gradients;
    for (size_t mib : {2, 6, 16}) {
      gradients.push_back(fsdp_memory::allocate(mib * kMiB, fsdp_memory::Use::kReducedGradient));
      std::memset(gradients.back().get(), 1, mib * kMiB);
      freed.push_back(gradients.back().get());
    }
  }
  // More than kKeptBlocks, all kept: the next backward makes the same.
  EXPECT_GE(fsdp_memory::kept_bytes(), 24 * kMiB) << "every freed gradient is kept";
  {
    // A whole parameter does not take a gradient's block.
    c10::DataPtr whole = fsdp_memory::allocate(2 * kMiB, fsdp_memory::Use::kWholeParameter);
    for (void* p : freed) EXPECT_NE(whole.get(), p);
    // A gradient takes the smallest kept block that holds it (a block maps
    // up to one huge page more than asked, to align it: the 2 MiB one holds
    // at most 4).
    c10::DataPtr gradient = fsdp_memory::allocate(5 * kMiB, fsdp_memory::Use::kReducedGradient);
    EXPECT_EQ(gradient.get(), freed[1]);
    c10::DataPtr larger = fsdp_memory::allocate(10 * kMiB, fsdp_memory::Use::kReducedGradient);
    EXPECT_EQ(larger.get(), freed[2]);
    fsdp_memory::release_kept();  // the 2 MiB gradient's block and the whole parameter's are unmapped
    EXPECT_EQ(fsdp_memory::kept_bytes(), 0u);
  }
  EXPECT_GE(fsdp_memory::kept_bytes(), 22 * kMiB) << "blocks in use at a release are kept when freed later";
  fsdp_memory::release_kept();
  EXPECT_EQ(fsdp_memory::kept_bytes(), 0u);
}

}  // namespace
}  // namespace cohort::testing
