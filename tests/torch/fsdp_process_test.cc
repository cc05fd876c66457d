// FSDP (cohort/fsdp.h) with ranks as processes: tests/torch/fsdp_worker
// trains a sharded network and the same network whole, step by step, and
// compares every parameter after every step (SGD, Adam, reshard after
// forward off, gradient accumulation, bf16, HSDP at 4 ranks, full state
// dicts).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

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

// parameters reads the "param NAME v1 v2 ..." lines of an output.
std::map<std::string, std::vector<double>> parameters(const std::string& out) {
  std::map<std::string, std::vector<double>> found;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string tag, name;
    if (!(words >> tag >> name) || tag != "param") continue;
    for (double v; words >> v;) found[name].push_back(v);
  }
  return found;
}

TEST(FullyShardAsTorch, EveryParameterAfterThreeStepsIsTorchsFullyShards) {
  // torch 2.13's fully_shard over gloo and cohort's, 3 ranks each (uneven
  // shards), the same network, seed, batches and optimizer. Tolerance
  // 1e-6: float32, and the two sum the ranks' gradients in other orders.
  const std::string python = COHORT_PYTHON_EXECUTABLE;
  if (python.empty() ||
      std::system((python + " -c 'import torch.distributed.fsdp' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "no python with torch to compare with";
  }
  const auto ours = parameters(start_ranks(3, {binary_path("tests/fsdp_worker"), "compare"})[0]);
  const auto theirs = parameters(
      start_ranks(3, {python, std::string(COHORT_SOURCE_DIR) + "/tests/python/fsdp_reference.py"})[0]);
  ASSERT_EQ(theirs.size(), 4u) << "torch's run printed no parameters";
  ASSERT_EQ(ours.size(), theirs.size());
  for (const auto& [name, values] : theirs) {
    auto it = ours.find(name);
    ASSERT_NE(it, ours.end()) << name;
    ASSERT_EQ(it->second.size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(it->second[i], values[i], 1e-6) << name << "[" << i << "]";
    }
  }
}

}  // namespace
}  // namespace cohort::testing
