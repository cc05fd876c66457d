// ScheduleInterleaved1F1B's order against torch 2.13's own
// (tests/python/pipeline_order_reference.py runs torch's
// _calculate_single_rank_operations): every rank of many shapes, the
// microbatches a multiple of the ranks or not.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <sstream>

#include "cohort/pipelining.h"
#include "support/subprocess.h"

namespace cohort::testing {
namespace {

struct Shape {
  int ranks, local_stages, microbatches;
};

std::string cohort_order(const Shape& shape, int rank) {
  std::ostringstream line;
  line << shape.ranks << ' ' << shape.local_stages << ' ' << shape.microbatches << ' ' << rank << ':';
  for (const auto& a :
       ScheduleInterleaved1F1B::rank_order(shape.ranks, rank, shape.local_stages, shape.microbatches)) {
    line << ' ' << (a.forward ? 'F' : 'B') << a.mb << 's' << a.stage;
  }
  return line.str();
}

TEST(PipelineOrder, Interleaved1F1BIsTorchsOrderForEveryRankAndShape) {
  const std::string python = COHORT_PYTHON_EXECUTABLE;
  if (python.empty() ||
      std::system((python + " -c 'import torch.distributed.pipelining' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "no python with torch to compare with";
  }
  // Microbatches a multiple of the ranks (rounds of P), and not: fewer
  // than the ranks, or more in one round (3 at 2 ranks, 6 at 4), or in
  // m / P rounds of more than P (10 at 4 ranks: 2 rounds of 5).
  const std::vector<Shape> shapes{{2, 2, 4},  {2, 2, 8}, {2, 3, 6}, {4, 2, 8}, {4, 2, 4},
                                  {4, 3, 12}, {2, 2, 3}, {2, 2, 1}, {4, 2, 3}, {4, 2, 6},
                                  {4, 2, 10}, {3, 2, 5}, {3, 2, 4}, {2, 3, 3}, {4, 3, 2}};
  std::vector<std::string> argv{python,
                                std::string(COHORT_SOURCE_DIR) + "/tests/python/pipeline_order_reference.py"};
  for (const auto& s : shapes) {
    argv.push_back(std::to_string(s.ranks) + ":" + std::to_string(s.local_stages) + ":" +
                   std::to_string(s.microbatches));
  }
  Subprocess torch_side(argv);
  std::istringstream torch_lines(torch_side.read_all(std::chrono::seconds(60)));
  ASSERT_EQ(torch_side.wait(), 0) << "the reference script failed";
  size_t compared = 0;
  for (const auto& shape : shapes) {
    for (int rank = 0; rank < shape.ranks; ++rank) {
      std::string want;
      ASSERT_TRUE(std::getline(torch_lines, want)) << "torch printed fewer lines than ranks";
      EXPECT_EQ(cohort_order(shape, rank), want);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 46u);
}

}  // namespace
}  // namespace cohort::testing
