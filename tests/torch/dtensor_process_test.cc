// DTensor (cohort/dtensor.h) with ranks as processes: tests/torch/
// dtensor_worker checks every piece and gradient against the whole tensor.
#include <gtest/gtest.h>

#include "support/ports.h"
#include "support/subprocess.h"

namespace cohort::testing {
namespace {

void run_dtensor_ranks(int world) {
  const uint16_t port = free_port();
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{binary_path("tests/dtensor_worker")},
        std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                 "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)}));
  }
  for (int r = 0; r < world; ++r) {
    const std::string out = ranks[r]->read_all(std::chrono::seconds(120));
    EXPECT_EQ(ranks[r]->wait(), 0) << out;
    EXPECT_NE(out.find("rank " + std::to_string(r) + " ok: every piece and gradient"), std::string::npos)
        << out;
  }
}

TEST(DTensorAsTorch, ThreeRanksWithUnevenShards) {
  run_dtensor_ranks(3);  // 10 rows: 4, 4, 2
}

TEST(DTensorAsTorch, FourRanksOnAOneAndATwoDimensionalMesh) {
  run_dtensor_ranks(4);  // 10 rows: 3, 3, 3, 1; and a 2 x 2 mesh
}

}  // namespace
}  // namespace cohort::testing
