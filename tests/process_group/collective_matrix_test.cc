// The collective matrix (docs/design.md): world sizes 1, 2, 3, 4, 5, 8 x sizes
// 0, 1, odd, over 1 MiB x every dtype x every op, for all_reduce, reduce and
// reduce_scatter, and every other collective, each checked against a
// reference computed locally (the checks are in collective_checks.cc,
// shared with the MPI backend's test under mpirun). Ranks are threads; the matrix runs three
// times: over shared memory (the default for ranks on one host), over TCP
// (COHORT_SHM=off), and mixed (pretend hosts of two ranks: pairs within a
// host use shared memory, the others TCP, and all_reduce runs
// hierarchically).
#include <gtest/gtest.h>

#include "cohort/config.h"
#include "process_group/collective_checks.h"
#include "process_group/reference.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

// The transport a run of the matrix uses.
enum class Paths { kShm, kTcp, kMixed };

// PrintTo names a Paths value in gtest's listings.
void PrintTo(Paths paths, std::ostream* os) {
  *os << (paths == Paths::kShm ? "shm" : paths == Paths::kTcp ? "tcp" : "mixed");
}

class CollectiveMatrix : public ::testing::TestWithParam<std::tuple<int, Paths, size_t>> {
 protected:
  void SetUp() override {
    switch (std::get<1>(GetParam())) {
      case Paths::kShm:
        break;
      case Paths::kTcp:
        set_config("COHORT_SHM", "off");
        break;
      case Paths::kMixed:
        set_config("COHORT_SHM_RANKS_PER_HOST", "2");
        break;
    }
  }
  void TearDown() override {
    reset_config("COHORT_SHM");
    reset_config("COHORT_SHM_RANKS_PER_HOST");
  }
  int world_size() const { return std::get<0>(GetParam()); }
};

TEST_P(CollectiveMatrix, Check) {
  const CollectiveCheck& check = collective_checks()[std::get<2>(GetParam())];
  if (world_size() < check.min_world) GTEST_SKIP() << check.name << " needs " << check.min_world << " ranks";
  run_ranks(world_size(), check.run);
}

std::string matrix_name(const ::testing::TestParamInfo<std::tuple<int, Paths, size_t>>& info) {
  static const char* const kPathNames[] = {"shm", "tcp", "mixed"};
  return collective_checks()[std::get<2>(info.param)].name + "_P" + std::to_string(std::get<0>(info.param)) +
         "_" + kPathNames[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectiveMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values(Paths::kShm, Paths::kTcp, Paths::kMixed),
                                            ::testing::Range(size_t{0}, collective_checks().size())),
                         matrix_name);


// The checks compute one period of the reference and copy it
// (reference.h), so the period must be one: every rank's contribution and
// every reduction repeat with it, and the filled buffers match
// contribution() element by element.
TEST(CollectiveReference, ContributionsAndResultsRepeatWithTheirPeriod) {
  for (DType d : all_dtypes()) {
    for (ReduceOp op : ops_for(d)) {
      const size_t period = contribution_period(d, op);
      for (int rank = 0; rank < 17; ++rank) {
        for (size_t i = 0; i < 3 * period; ++i) {
          ASSERT_EQ(contribution(d, op, rank, i), contribution(d, op, rank, i + period))
              << dtype_name(d) << " " << reduce_op_name(op) << " rank " << rank << " [" << i << "]";
        }
      }
      const PeriodicValues result = PeriodicValues::reduction(d, op, 16);
      for (size_t i = 0; i < 3 * period + 5; ++i)
        ASSERT_EQ(result.at(i), stored(d, expected(d, op, 16, i))) << dtype_name(d) << " " << reduce_op_name(op);
      TypedBuffer buf(d, 2 * period + 5);
      fill_contributions(buf, op, 3, 7);
      for (size_t i = 0; i < buf.count(); ++i)
        ASSERT_EQ(buf.at(i), stored(d, contribution(d, op, 3, 7 + i))) << dtype_name(d) << " " << reduce_op_name(op);
    }
  }
}

}  // namespace
}  // namespace cohort::testing
