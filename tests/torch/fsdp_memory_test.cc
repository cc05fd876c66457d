// FSDP's memory for whole parameters (src/torch/fsdp_memory.h): blocks of
// 2 MiB and more are mappings of their own; a reusable one given back is
// kept (at most kKeptBlocks) and handed out again, until release_kept.
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
    c10::DataPtr block = fsdp_memory::allocate(3 * kMiB, /*reusable=*/true);
    first = block.get();
    std::memset(first, 7, 3 * kMiB);  // it is real, writable memory
    EXPECT_EQ(fsdp_memory::kept_bytes(), 0u);
  }
  EXPECT_GE(fsdp_memory::kept_bytes(), 3 * kMiB) << "a reusable block given back is kept";
  {
    // A smaller request takes the kept block (it fits), with its contents.
    c10::DataPtr again = fsdp_memory::allocate(2 * kMiB, /*reusable=*/true);
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
    for (size_t mib : {2, 4, 6}) blocks.push_back(fsdp_memory::allocate(mib * kMiB, /*reusable=*/true));
  }
  // Three given back, two kept: the 4 and 6 MiB ones (each mapped with up
  // to one huge page of room to align it).
  EXPECT_GE(fsdp_memory::kept_bytes(), 10 * kMiB);
  EXPECT_LE(fsdp_memory::kept_bytes(), 10 * kMiB + 2 * 2 * kMiB + 2 * 2 * kMiB);
  fsdp_memory::release_kept();
}

TEST(FsdpMemory, SmallAndNonReusableBlocksAreNeverKept) {
  fsdp_memory::release_kept();
  {
    c10::DataPtr small = fsdp_memory::allocate(64 * 1024, /*reusable=*/true);
    c10::DataPtr gradient = fsdp_memory::allocate(4 * kMiB, /*reusable=*/false);
    ASSERT_NE(small.get(), nullptr);
    ASSERT_NE(gradient.get(), nullptr);
  }
  EXPECT_EQ(fsdp_memory::kept_bytes(), 0u);
}

}  // namespace
}  // namespace cohort::testing
