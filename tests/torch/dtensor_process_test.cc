// DTensor (cohort/dtensor.h) with ranks as processes: tests/torch/
// dtensor_worker checks every piece and gradient against the whole tensor,
// and against torch's own DTensor (tests/python/dtensor_reference.py).
#include <gtest/gtest.h>

#include <cstdlib>

#include "support/rank_lines.h"
#include "support/subprocess.h"
#include "torch/worker_ranks.h"

namespace cohort::testing {
namespace {

void run_dtensor_ranks(int world) {
  auto out = start_ranks(world, {binary_path("tests/dtensor_worker")});
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(out[r].find("rank " + std::to_string(r) + " ok: every piece and gradient"), std::string::npos)
        << out[r];
  }
}

// cohort/tensor_parallel.h: the worker's "tensor_parallel" checks.
void run_tensor_parallel_ranks(int world) {
  auto out = start_ranks(world, {binary_path("tests/dtensor_worker"), "tensor_parallel"});
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(out[r].find("rank " + std::to_string(r) + " ok: every piece and gradient"), std::string::npos)
        << out[r];
  }
}

TEST(TensorParallel, AnMlpCutColumnThenRowWiseIsTheOneProcessModelAtTwoThreeAndFourRanks) {
  run_tensor_parallel_ranks(2);
  run_tensor_parallel_ranks(3);  // 10 hidden features: 4, 4, 2
  run_tensor_parallel_ranks(4);  // 3, 3, 3, 1
}

TEST(DTensorAsTorch, ThreeRanksWithUnevenShards) {
  run_dtensor_ranks(3);  // 10 rows: 4, 4, 2
}

TEST(DTensorAsTorch, FourRanksOnAOneAndATwoDimensionalMesh) {
  run_dtensor_ranks(4);  // 10 rows: 3, 3, 3, 1; and a 2 x 2 mesh
}

TEST(DTensorAsTorch, EveryPieceAndGradientIsTorchsOwn) {
  // torch 2.13's DTensor over gloo and cohort's, 4 processes each, the
  // same layouts: every rank's pieces and gradients, line by line.
  const std::string python = COHORT_PYTHON_EXECUTABLE;
  if (python.empty() ||
      std::system((python + " -c 'import torch.distributed.tensor' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "no python with torch to compare with";
  }
  auto ours = start_ranks(4, {binary_path("tests/dtensor_worker"), "compare"});
  auto theirs =
      start_ranks(4, {python, std::string(COHORT_SOURCE_DIR) + "/tests/python/dtensor_reference.py"});
  for (int r = 0; r < 4; ++r) {
    const auto want = rank_lines(theirs[r]);
    ASSERT_EQ(want.size(), 10u) << theirs[r];
    EXPECT_EQ(rank_lines(ours[r]), want) << "rank " << r;
  }
}

}  // namespace
}  // namespace cohort::testing
