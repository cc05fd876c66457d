// Pipeline parallelism (cohort/pipelining.h) with stages as processes:
// tests/torch/pipeline_worker trains two steps with each schedule and
// checks every stage against the whole model run in one process.
#include <gtest/gtest.h>

#include "support/subprocess.h"
#include "torch/worker_ranks.h"

namespace cohort::testing {
namespace {

void run_pipeline(int stages, const std::string& schedule, int microbatches) {
  auto out = start_ranks(stages, {binary_path("tests/pipeline_worker"), schedule, std::to_string(microbatches)});
  for (int r = 0; r < stages; ++r) {
    EXPECT_NE(out[r].find("rank " + std::to_string(r) + " ok: every loss, gradient and parameter"),
              std::string::npos)
        << schedule << " at " << stages << " stages, " << microbatches << " microbatches:\n" << out[r];
  }
}

TEST(Pipeline, GPipeAtTwoAndFourStagesIsTheWholeModel) {
  run_pipeline(2, "gpipe", 4);
  run_pipeline(4, "gpipe", 4);
  run_pipeline(4, "gpipe", 3);  // uneven microbatches: 3, 3, 2
}

TEST(Pipeline, OneFOneBAtTwoAndFourStagesIsTheWholeModel) {
  run_pipeline(2, "1f1b", 4);
  run_pipeline(4, "1f1b", 8);
  run_pipeline(4, "1f1b", 2);  // fewer microbatches than stages
  run_pipeline(2, "1f1b-user", 4);  // each stage a user module
}

TEST(Pipeline, Interleaved1F1BWithTwoStagesARankIsTheWholeModel) {
  run_pipeline(2, "interleaved", 4);  // 4 stages: 0 and 2 on rank 0, 1 and 3 on rank 1
  run_pipeline(2, "interleaved", 8);
  run_pipeline(4, "interleaved", 8);  // 8 stages
  run_pipeline(4, "interleaved", 4);
  // Microbatches not a multiple of the ranks: one round of 3 (2 ranks),
  // one round of 6 (4 ranks), as torch 2.13 allows.
  run_pipeline(2, "interleaved", 3);
  run_pipeline(4, "interleaved", 6);
}

// Every survivor raises (none hangs), naming its own stage and, through
// the transport's failure relay, the killed stage's rank.
TEST(Pipeline, AStageKilledMidStepFailsEveryOtherStageNamingIt) {
  auto out = start_ranks(4, {binary_path("tests/pipeline_worker"), "kill"}, {}, {3, 128 + 9, 3, 3});
  for (int r : {0, 2, 3}) {
    EXPECT_NE(out[r].find("rank " + std::to_string(r) + " raised: pipeline stage " + std::to_string(r) + " of 4"),
              std::string::npos)
        << out[r];
    EXPECT_NE(out[r].find("rank 1 (127.0.0.1:"), std::string::npos) << out[r];
    EXPECT_NE(out[r].find("closed its connection (the peer process exited or was killed)"), std::string::npos)
        << out[r];
  }
}

}  // namespace
}  // namespace cohort::testing
