// The ring all_reduce over vectors longer than one pass (1 MiB, or 256 KiB
// per rank with more than 4 ranks) runs as
// consecutive rings over pieces: every piece, the last one that takes the
// remainder, and the element order across pieces must come out right.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/config.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

class RingPasses : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    set_config("COHORT_SHM", "off");  // the ring runs over the network
    set_config("COHORT_ALGO", "all_reduce=ring");
  }
  void TearDown() override {
    reset_config("COHORT_SHM");
    reset_config("COHORT_ALGO");
  }
};

TEST_P(RingPasses, LongVectorsMatchTheReferenceInEveryPiece) {
  const int world = GetParam();
  const size_t pass = std::max<size_t>(1 << 20, (256 << 10) * static_cast<size_t>(world)) / sizeof(int32_t);
  // Two and a half passes; one pass, and two, with a remainder shorter
  // than the world size (taken by the last pass); exactly two passes.
  for (size_t count : {2 * pass + pass / 2 + 7, pass + 3, 2 * pass + 2, 2 * pass}) {
    run_ranks(world, [&](ProcessGroup& g) {
      std::vector<int32_t> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>((i * 7 + g.rank() * 13) % 1000);
      g.all_reduce(Buffer::of(v));
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < count; ++i) {
        int32_t want = 0;
        for (int q = 0; q < world; ++q) want += static_cast<int32_t>((i * 7 + q * 13) % 1000);
        if (v[i] != want && wrong++ == 0) first = i;
      }
      EXPECT_EQ(wrong, 0u) << "rank " << g.rank() << ", " << count << " elements, first wrong [" << first
                           << "] = " << v[first];
    });
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingPasses, ::testing::Values(2, 3, 5),
                         [](const auto& param_info) { return "P" + std::to_string(param_info.param); });

}  // namespace
}  // namespace cohort::testing
