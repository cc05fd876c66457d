// COHORT_DEBUG=info: groups log their creation and the algorithms their
// collectives run, even where COHORT_LOG_LEVEL asks for warnings only.
#include <gtest/gtest.h>

#include "algorithms/selection.h"
#include "cohort/config.h"
#include "process_group/thread_ranks.h"
#include "support/messages.h"

namespace cohort::testing {
namespace {

std::string log_of_two_ranks_all_reducing() {
  ::testing::internal::CaptureStderr();
  run_ranks(2, [](ProcessGroup& g) {
    std::vector<float> small(4, 1.0f), large(1 << 20, 1.0f);
    g.all_reduce(Buffer::of(small));
    g.all_reduce(Buffer::of(small));
    g.all_reduce(Buffer::of(large));
  });
  return ::testing::internal::GetCapturedStderr();
}

TEST(DebugInfoTest, InfoLogsGroupCreationAndEachAlgorithmChoiceOncePerSizeClass) {
  set_config("COHORT_LOG_LEVEL", "warning");
  set_config("COHORT_DEBUG", "info");
  set_config("COHORT_SHM", "off");  // the network table has several size classes
  const std::string log = log_of_two_ranks_all_reducing();
  reset_config("COHORT_SHM");
  reset_config("COHORT_DEBUG");
  reset_config("COHORT_LOG_LEVEL");
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(
        log.find("group test created: rank " + std::to_string(r) +
                 " of 2, global ranks [0, 1], backend cohort, timeout 60000 ms; links (no shared memory): "
                 "TCP with ranks [" +
                 std::to_string(1 - r) + "]; collectives not checked (COHORT_DEBUG=info)"),
        std::string::npos)
        << log;
  }
  // #1 and #2 are of one size class (logged once per rank), #3 of another.
  // The class reaches as far as the table keeps recursive doubling.
  const size_t limit =
      AlgorithmTable::for_config(GroupShape::flat(2)).class_limit(Collective::kAllReduce, 16);
  EXPECT_EQ(times_in(log,
                     "all_reduce #1 of group test runs recursive_doubling: 16 bytes per rank, 2 ranks, none "
                     "sharing memory (logged once for its size class: up to " +
                         std::to_string(limit) + " bytes per rank)"),
            2u)
      << log;
  EXPECT_EQ(times_in(log, "all_reduce #2 of group test runs"), 0u) << log;
  EXPECT_EQ(
      times_in(log,
               "all_reduce #3 of group test runs ring: 4194304 bytes per rank, 2 ranks, none sharing memory "
               "(logged once for its size class: no upper bound)"),
      2u)
      << log;
}

// Each peer is listed under the kind of link that reaches it, as the
// group's connecting chose (shared memory within a pretend host of 2).
TEST(DebugInfoTest, InfoListsEachPeerUnderTheKindOfLinkThatReachesIt) {
  set_config("COHORT_LOG_LEVEL", "warning");
  set_config("COHORT_DEBUG", "info");
  set_config("COHORT_SHM_RANKS_PER_HOST", "2");
  ::testing::internal::CaptureStderr();
  run_ranks(4, [](ProcessGroup& g) { g.barrier(); });
  const std::string log = ::testing::internal::GetCapturedStderr();
  reset_config("COHORT_SHM_RANKS_PER_HOST");
  reset_config("COHORT_DEBUG");
  reset_config("COHORT_LOG_LEVEL");
  const char* const expected[] = {"shared memory with ranks [1], TCP with ranks [2, 3]",
                                  "shared memory with ranks [0], TCP with ranks [2, 3]",
                                  "shared memory with ranks [3], TCP with ranks [0, 1]",
                                  "shared memory with ranks [2], TCP with ranks [0, 1]"};
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(log.find("group test created: rank " + std::to_string(r) +
                       " of 4, global ranks [0, 1, 2, 3], backend cohort, timeout 60000 ms; links (several "
                       "hosts): " +
                       expected[r]),
              std::string::npos)
        << log;
  }
}

TEST(DebugInfoTest, OffLogsNothingOfIt) {
  set_config("COHORT_LOG_LEVEL", "warning");
  const std::string log = log_of_two_ranks_all_reducing();
  reset_config("COHORT_LOG_LEVEL");
  EXPECT_EQ(log.find("group test created"), std::string::npos) << log;
  EXPECT_EQ(log.find(" runs "), std::string::npos) << log;
}

}  // namespace
}  // namespace cohort::testing
