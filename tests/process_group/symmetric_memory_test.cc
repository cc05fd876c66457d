// Symmetric memory (ProcessGroup::alloc_symmetric): the blocks are shared
// among the ranks of a host, collectives on them give the same results as on
// ordinary memory (also when only some ranks use them, or pieces of them),
// and no segment name is left behind. Ranks are threads, each with its own
// mapping of the segment, as separate processes have.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "cohort/config.h"
#include "cohort/errors.h"
#include "common/shm_segment.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

// Over a slot (512 KiB), so that data that goes through the slots takes
// several chunks, and an odd count so that blocks differ in length.
constexpr size_t kLarge = 300001;

float value(int rank, size_t i) {
  return static_cast<float>((rank * 5 + i * 3) % 17);
}

// check_all_reduce fills `buf` (rank's values), runs SUM or AVG, and compares with
// the reference computed here.
void check_all_reduce(ProcessGroup& g, Buffer buf, ReduceOp op, const std::string& what) {
  auto* x = static_cast<float*>(buf.data);
  for (size_t i = 0; i < buf.count; ++i) x[i] = value(g.rank(), i);
  AllReduceOptions o;
  o.op = op;
  g.all_reduce(buf, o);
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < buf.count; ++i) {
    float want = 0;
    for (int q = 0; q < g.size(); ++q) want += value(q, i);
    // AVG multiplies by 1/size, which may round differently from a division.
    const float slack = op.kind == ReduceOp::AVG ? 1e-6f * want : 0.0f;
    if (op.kind == ReduceOp::AVG) want /= static_cast<float>(g.size());
    if (std::abs(x[i] - want) > slack && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << what << ": rank " << g.rank() << " first wrong element [" << first << "] = " << x[first];
}

class SymmetricMemoryTest : public ::testing::TestWithParam<int> {};

TEST_P(SymmetricMemoryTest, AllReduceOnSharedBlocksMatchesTheReference) {
  run_ranks(GetParam(), [](ProcessGroup& g) {
    auto block = g.alloc_symmetric((kLarge + 1000) * sizeof(float));
    ASSERT_TRUE(block->shared()) << "ranks on one host should share the block";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block->data()) % 4096, 0u);
    check_all_reduce(g, block->buffer(DType::kFloat32, kLarge), ReduceOp::SUM, "whole block");
    check_all_reduce(g, block->buffer(DType::kFloat32, kLarge, 4000), ReduceOp::AVG, "at an offset");
    check_all_reduce(g, block->buffer(DType::kFloat32, 1001), ReduceOp::SUM, "small (through the slots)");
  });
}

TEST_P(SymmetricMemoryTest, RanksMayMixSharedAndOrdinaryBuffersAndOffsets) {
  run_ranks(GetParam(), [](ProcessGroup& g) {
    auto block = g.alloc_symmetric((kLarge + 64) * sizeof(float));
    std::vector<float> ordinary(kLarge);
    // Rank 0 reduces ordinary memory; the others use the block, each at its
    // own offset.
    Buffer buf = g.rank() == 0 ? Buffer::of(ordinary.data(), kLarge)
                               : block->buffer(DType::kFloat32, kLarge, static_cast<size_t>(g.rank()) * 16);
    check_all_reduce(g, buf, ReduceOp::SUM, "mixed");
  });
}

TEST_P(SymmetricMemoryTest, CoalescedPiecesOfBlocksSplitDifferentlyByRank) {
  run_ranks(GetParam(), [](ProcessGroup& g) {
    auto a = g.alloc_symmetric(kLarge * sizeof(float));
    auto b = g.alloc_symmetric(kLarge * sizeof(float));
    // Rank r cuts the total at a rank-dependent point, partly in each block.
    const size_t cut = 1000 + static_cast<size_t>(g.rank()) * 77777;
    std::vector<Buffer> pieces{a->buffer(DType::kFloat32, cut), b->buffer(DType::kFloat32, kLarge - cut, 512)};
    std::vector<float> all(kLarge);
    for (size_t i = 0; i < kLarge; ++i) all[i] = value(g.rank(), i);
    std::memcpy(pieces[0].data, all.data(), cut * sizeof(float));
    std::memcpy(pieces[1].data, all.data() + cut, (kLarge - cut) * sizeof(float));
    g.all_reduce_coalesced(pieces);
    size_t wrong = 0;
    for (size_t i = 0; i < kLarge; ++i) {
      float want = 0;
      for (int q = 0; q < g.size(); ++q) want += value(q, i);
      const float got = i < cut ? static_cast<float*>(pieces[0].data)[i]
                                : static_cast<float*>(pieces[1].data)[i - cut];
      wrong += got != want;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << g.rank();
  });
}

TEST_P(SymmetricMemoryTest, BlocksFreedAndAllocatedAgainStayCorrect) {
  run_ranks(GetParam(), [](ProcessGroup& g) {
    for (int round = 0; round < 3; ++round) {
      auto block = g.alloc_symmetric(kLarge * sizeof(float));
      check_all_reduce(g, block->buffer(DType::kFloat32, kLarge), ReduceOp::SUM,
                       "round " + std::to_string(round));
      g.barrier();  // nobody frees its block while another still reads it
    }
  });
}

// check_all_gather: every rank's input (its values) gathered into `out`.
void check_all_gather(ProcessGroup& g, Buffer input, size_t count, const std::string& what) {
  auto* x = static_cast<float*>(input.data);
  for (size_t i = 0; i < count; ++i) x[i] = value(g.rank(), i);
  std::vector<float> out(count * static_cast<size_t>(g.size()), -1.0f);
  g.all_gather_into_tensor(Buffer::of(out.data(), out.size()), input);
  size_t wrong = 0;
  for (int q = 0; q < g.size(); ++q) {
    for (size_t i = 0; i < count; ++i) wrong += out[static_cast<size_t>(q) * count + i] != value(q, i);
  }
  EXPECT_EQ(wrong, 0u) << what << ": rank " << g.rank();
}

// Inputs in the block are read in place by the others (one copy); 3 MiB a
// rank goes through the slots otherwise (several chunks), 4 KiB in one.
TEST_P(SymmetricMemoryTest, AllGatherOfSharedInputsMatchesTheReference) {
  run_ranks(GetParam(), [](ProcessGroup& g) {
    constexpr size_t kMiB3 = 3 * 262144 + 1;
    auto block = g.alloc_symmetric((kMiB3 + 64) * sizeof(float));
    std::vector<float> ordinary(kMiB3);
    check_all_gather(g, block->buffer(DType::kFloat32, kMiB3), kMiB3, "whole block");
    check_all_gather(g, block->buffer(DType::kFloat32, 1001, 256), 1001, "4 KiB at an offset");
    // Rank 0's input is ordinary memory, the others' in the block at
    // offsets of their own: rank 0's goes through the slots.
    Buffer mixed = g.rank() == 0 ? Buffer::of(ordinary.data(), kMiB3)
                                 : block->buffer(DType::kFloat32, kMiB3, static_cast<size_t>(g.rank()) * 16);
    check_all_gather(g, mixed, kMiB3, "mixed");
    g.barrier();  // nobody frees its block while another still reads it
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SymmetricMemoryTest, ::testing::Values(2, 3, 4),
                         [](const auto& param_info) { return "P" + std::to_string(param_info.param); });

// own_segment_names lists the names in /dev/shm that this process made
// (other test processes may be making their own meanwhile).
std::vector<std::string> own_segment_names() {
  const std::string mark = "." + std::to_string(::getpid()) + ".";
  std::vector<std::string> names;
  for (const std::string& name : live_segment_names()) {
    if (name.find(mark) != std::string::npos) names.push_back(name);
  }
  return names;
}

TEST(SymmetricMemory, NoSegmentNameOutlivesTheAllocation) {
  run_ranks(3, [&](ProcessGroup& g) {
    auto block = g.alloc_symmetric(1 << 20);
    ASSERT_TRUE(block->shared());
    // Every rank has mapped it once alloc_symmetric returns anywhere... but
    // the last to map removes the name: wait for all.
    g.barrier();
    EXPECT_EQ(own_segment_names(), std::vector<std::string>{}) << "rank " << g.rank();
    g.barrier();
  });
}

TEST(SymmetricMemory, WithoutSharedMemoryTheBlockIsOrdinaryAndCollectivesWork) {
  set_config("COHORT_SHM", "off");
  run_ranks(2, [](ProcessGroup& g) {
    auto block = g.alloc_symmetric(kLarge * sizeof(float));
    EXPECT_FALSE(block->shared());
    check_all_reduce(g, block->buffer(DType::kFloat32, kLarge), ReduceOp::SUM, "over TCP");
  });
  reset_config("COHORT_SHM");
}

TEST(SymmetricMemory, ABufferThatDoesNotFitIsRefusedWithItsSize) {
  run_ranks(1, [](ProcessGroup& g) {
    auto block = g.alloc_symmetric(100);
    EXPECT_EQ(block->bytes(), 100u);
    try {
      block->buffer(DType::kFloat64, 13);
      ADD_FAILURE() << "13 doubles do not fit in 100 bytes";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("13 elements of float64 at offset 0 do not fit in a block of 100 bytes"),
                std::string::npos)
          << e.what();
    }
  });
}

}  // namespace
}  // namespace cohort::testing
