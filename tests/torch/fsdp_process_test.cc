// FSDP (cohort/fsdp.h) with ranks as processes: tests/torch/fsdp_worker
// trains a sharded network and the same network whole, step by step, and
// compares every parameter after every step (SGD, Adam, reshard after
// forward off, gradient accumulation, bf16, HSDP at 4 ranks, full state
// dicts).
#include <gtest/gtest.h>

#include "support/subprocess.h"
#include "torch/worker_ranks.h"

namespace cohort::testing {
namespace {

void run_fsdp_ranks(int world) {
  auto out = start_ranks(world, {binary_path("tests/fsdp_worker")});
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(out[r].find("rank " + std::to_string(r) + " ok: every step as the single-process model's"),
              std::string::npos)
        << out[r];
  }
}

TEST(FullyShardAsTorch, TwoRanksTrainAsOneProcess) {
  run_fsdp_ranks(2);
}

TEST(FullyShardAsTorch, ThreeRanksWithUnevenShardsTrainAsOneProcess) {
  run_fsdp_ranks(3);  // 10 rows: 4, 4, 2
}

TEST(FullyShardAsTorch, FourRanksWithAnEmptyShardAndHsdpTrainAsOneProcess) {
  run_fsdp_ranks(4);  // 3 rows: 1, 1, 1, 0; and a 2 x 2 mesh
}

}  // namespace
}  // namespace cohort::testing
