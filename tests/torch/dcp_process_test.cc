// Distributed checkpoints (cohort/distributed_checkpoint.h) with ranks as
// processes (tests/torch/dcp_worker): saved at 4 ranks from an FSDP
// network, loaded at 2, 3 and 4 into fresh networks and another layout;
// a save whose rank is killed (SIGKILL) fails naming it and keeps the
// previous checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "support/subprocess.h"
#include "torch/worker_ranks.h"

namespace cohort::testing {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("cohort-dcp-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

void expect_ok(const std::vector<std::string>& out, const std::string& mode) {
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_NE(out[r].find("rank " + std::to_string(r) + " ok: "), std::string::npos)
        << mode << ": " << out[r];
    EXPECT_EQ(out[r].find("wrong"), std::string::npos) << mode << ": " << out[r];
  }
}

TEST(DistributedCheckpoint, SavedAtFourRanksLoadsAtTwoThreeAndFour) {
  TempDir tmp;
  const std::string dir = (tmp.path / "ckpt").string();
  const std::string worker = binary_path("tests/dcp_worker");
  expect_ok(start_ranks(4, {worker, "save", dir}), "save at 4");
  for (int world : {2, 3, 4}) expect_ok(start_ranks(world, {worker, "load", dir}), "load");
}

TEST(DistributedCheckpoint, ASaveWhoseRankIsKilledFailsNamingItAndKeepsThePreviousCheckpoint) {
  TempDir tmp;
  const std::string dir = (tmp.path / "ckpt").string();
  const std::string worker = binary_path("tests/dcp_worker");
  expect_ok(start_ranks(2, {worker, "save", dir}), "save at 2");
  // Rank 1 is killed by SIGKILL while it saves: 128 + 9.
  expect_ok(start_ranks(2, {worker, "crash", dir}, {"COHORT_TIMEOUT_S=3"}, {0, 128 + SIGKILL}), "crash");
  expect_ok(start_ranks(2, {worker, "load", dir}), "load after the failed save");
}

}  // namespace
}  // namespace cohort::testing
