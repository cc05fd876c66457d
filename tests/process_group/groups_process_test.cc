// Groups as torch has them, with ranks as real processes (the module-level
// API is per process): a non-member's handle, sorted ranks, torch's
// default synchronisation of new_group and use_local_synchronization, a
// rank that never calls new_group, backend queries, destroying one group.
// The ranks are tests/groups_worker (its modes say what each checks).
#include <gtest/gtest.h>

#include <cstdlib>

#include "support/ports.h"
#include "support/rank_lines.h"
#include "support/subprocess.h"

namespace cohort::testing {
namespace {

// run_groups runs `world` (4) groups_worker ranks in `mode` and returns
// each one's output, after checking that every rank said "ok" and exited 0.
std::vector<std::string> run_groups(const std::string& mode, const std::vector<std::string>& extra_env = {},
                                    int world = 4) {
  const uint16_t port = free_port();
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> env = {"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                    "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)};
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{binary_path("tests/groups_worker"), mode}, env));
  }
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) {
    out.push_back(ranks[r]->read_all(std::chrono::seconds(90)));
    EXPECT_EQ(ranks[r]->wait(), 0) << "rank " << r << ": " << out.back();
    EXPECT_NE(out.back().find("rank " + std::to_string(r) + " ok"), std::string::npos) << out.back();
  }
  return out;
}

// start_ranks starts groups_worker `mode` once per entry of `envs` (each
// its RANK and WORLD_SIZE) on one store port; returns each one's output
// and exit code.
std::vector<std::pair<std::string, int>> start_ranks(const std::string& mode,
                                                     const std::vector<std::vector<std::string>>& envs) {
  const uint16_t port = free_port();
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (auto env : envs) {
    env.insert(env.end(), {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)});
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{binary_path("tests/groups_worker"), mode}, env, true));
  }
  std::vector<std::pair<std::string, int>> out;
  for (auto& r : ranks) {
    std::string text = r->read_all(std::chrono::seconds(90));
    out.emplace_back(text, r->wait());
  }
  return out;
}

TEST(GroupsAsTorch, ARankGivenTwiceIsNamedWithBothProcesses) {
  // Ranks 0, 1 and 1 of 2: whichever rank 1 comes second is refused at
  // once, naming both processes; no process waits out its timeout. Rank 0
  // hosts the store until the refusal (join-hold): with plain join the
  // first pair could finish and close the store before the second rank 1
  // claimed its seat, which then lost the server instead (seen once in a
  // full ctest run).
  auto out = start_ranks(
      "join-hold", {{"RANK=0", "WORLD_SIZE=2"}, {"RANK=1", "WORLD_SIZE=2"}, {"RANK=1", "WORLD_SIZE=2"}});
  int refused = 0;
  for (const auto& [text, code] : out) {
    if (code == 0) continue;
    const size_t at = text.find("rank 1 joined twice: pid ");
    EXPECT_NE(at, std::string::npos) << text;
    if (at != std::string::npos) {
      ++refused;
      EXPECT_NE(text.find(" and pid ", at), std::string::npos) << text;
    }
  }
  EXPECT_GE(refused, 1);
  EXPECT_EQ(out[2].second == 0 && out[1].second == 0, false) << "both rank 1s joined";
}

TEST(GroupsAsTorch, TwoJobsStartedTogetherOnOnePortNeverMix) {
  // Jobs a and b, two ranks each, all on one MASTER_PORT at once. One rank
  // 0 gets the port and hosts the store; its job runs. The other job's
  // rank 1 reaches that store and is refused alone, naming both jobs; its
  // rank 0 cannot listen on the port.
  auto out = start_ranks("join-hold", {{"RANK=0", "WORLD_SIZE=2", "COHORT_JOB_ID=a"},
                                       {"RANK=1", "WORLD_SIZE=2", "COHORT_JOB_ID=a"},
                                       {"RANK=0", "WORLD_SIZE=2", "COHORT_JOB_ID=b"},
                                       {"RANK=1", "WORLD_SIZE=2", "COHORT_JOB_ID=b"}});
  const bool a_won = out[0].second == 0;
  const auto& winner0 = out[a_won ? 0 : 2];
  const auto& winner1 = out[a_won ? 1 : 3];
  const auto& loser0 = out[a_won ? 2 : 0];
  const auto& loser1 = out[a_won ? 3 : 1];
  const std::string won = a_won ? "a" : "b", lost = a_won ? "b" : "a";
  EXPECT_EQ(winner0.second, 0) << winner0.first;
  EXPECT_EQ(winner1.second, 0) << "job " << won << "'s rank 1 did not join its job: " << winner1.first;
  EXPECT_NE(loser0.second, 0) << loser0.first;
  EXPECT_NE(loser1.second, 0) << "job " << lost << "'s rank 1 joined job " << won << ": " << loser1.first;
  const std::string named = "of job " + lost + ", but rank 0 of the group in this store (pid ";
  EXPECT_NE(loser1.first.find(named), std::string::npos) << loser1.first;
  EXPECT_NE(loser1.first.find("of job " + won + ") is of job " + won), std::string::npos) << loser1.first;
}

TEST(GroupsAsTorch, AStrangerThatSaysAnotherWorldSizeIsRefusedAloneAndTheJobRuns) {
  // Job a's two ranks and job b's rank 1 of 3 on one port: b's rank is
  // refused for its job, and a's ranks do not hear of it.
  auto out = start_ranks("join-hold", {{"RANK=0", "WORLD_SIZE=2", "COHORT_JOB_ID=a"},
                                       {"RANK=1", "WORLD_SIZE=2", "COHORT_JOB_ID=a"},
                                       {"RANK=1", "WORLD_SIZE=3", "COHORT_JOB_ID=b"}});
  EXPECT_EQ(out[0].second, 0) << out[0].first;
  EXPECT_EQ(out[1].second, 0) << out[1].first;
  EXPECT_NE(out[2].second, 0) << out[2].first;
  EXPECT_NE(out[2].first.find("is of job b, but rank 0 of the group in this store"), std::string::npos)
      << out[2].first;
}

TEST(GroupsAsTorch, RanksThatDisagreeOnTheWorldSizeAreBothToldWhoSaysWhat) {
  auto out = start_ranks("join", {{"RANK=0", "WORLD_SIZE=2"}, {"RANK=1", "WORLD_SIZE=3"}});
  for (const auto& [text, code] : out) {
    EXPECT_EQ(code, 1) << text;
    EXPECT_NE(text.find("says world_size"), std::string::npos) << text;
  }
}

TEST(DeviceMeshAsTorch, A2x2MeshHasItsCoordinatesGroupsAndSubMeshesOnEveryRank) {
  auto out = run_groups("mesh");
  EXPECT_NE(out[3].find("rank 3 ok: mesh DeviceMesh((dp=2, tp=2), 'cpu', stride=(2, 1)), at (1, 1)"),
            std::string::npos)
      << out[3];
}

// same_as_torchs_mesh runs mesh-print and tests/python/mesh_reference.py
// (torch 2.13's DeviceMesh over gloo) at `world` ranks: line by line equal.
void same_as_torchs_mesh(int world) {
  const std::string python = COHORT_PYTHON_EXECUTABLE;
  if (python.empty() ||
      std::system((python + " -c 'import torch.distributed.device_mesh' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "no python with torch to compare with";
  }
  auto ours = run_groups("mesh-print", {}, world);
  const uint16_t port = free_port();
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{python, std::string(COHORT_SOURCE_DIR) + "/tests/python/mesh_reference.py"},
        std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                 "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
                                 "OMP_NUM_THREADS=1"}));
  }
  for (int r = 0; r < world; ++r) {
    const std::string theirs = ranks[r]->read_all(std::chrono::seconds(120));
    ASSERT_EQ(ranks[r]->wait(), 0) << theirs;
    const auto want = rank_lines(theirs), got = rank_lines(ours[r]);
    ASSERT_EQ(want.size(), 3u) << theirs;
    EXPECT_EQ(got, want) << "rank " << r;
  }
}

TEST(DeviceMeshAsTorch, EveryRankSaysWhatTorchsDeviceMeshSaysOfTheSameMeshes) {
  same_as_torchs_mesh(4);  // 2 x 2, 4, 1 x 2 x 2
}

TEST(DeviceMeshAsTorch, SixRanksOnA2x3MeshSayWhatTorchsSay) {
  same_as_torchs_mesh(6);  // 2 x 3, 6, 1 x 2 x 3
}

TEST(GroupsAsTorch, NonMembersGetAHandleWhoseCallsDoNothingAndMembersSum) {
  auto out = run_groups("semantics");
  EXPECT_NE(out[0].find("member 0"), std::string::npos) << out[0];
  EXPECT_NE(out[1].find("member 1"), std::string::npos) << out[1];
  EXPECT_NE(out[0].find("elastic 0"), std::string::npos) << out[0];
}

TEST(GroupsAsTorch, BackendQueriesSayWhatThisBuildHasAndWhoLaunched) {
  auto out = run_groups("semantics", {"TORCHELASTIC_RUN_ID=job-7"});
#ifdef COHORT_TEST_HAVE_MPI
  const std::string mpi = "mpi 1";
#else
  const std::string mpi = "mpi 0";
#endif
#ifdef COHORT_TEST_HAVE_NCCL
  const std::string nccl = "nccl 1";
#else
  const std::string nccl = "nccl 0";
#endif
  for (const auto& o : out) {
    EXPECT_NE(o.find(mpi), std::string::npos) << o;
    EXPECT_NE(o.find(nccl), std::string::npos) << o;
    EXPECT_NE(o.find("elastic 1"), std::string::npos) << o;
  }
}

TEST(GroupsAsTorch, NewGroupWaitsForEveryRankOfTheJobByDefault) {
  run_groups("global-sync");
}

TEST(GroupsAsTorch, LocalSynchronizationLetsNonMembersGoOn) {
  run_groups("local-sync");
}

TEST(GroupsAsTorch, ARankThatNeverCallsNewGroupIsATimeoutThatCountsTheRanks) {
  run_groups("absent");
}

}  // namespace
}  // namespace cohort::testing
