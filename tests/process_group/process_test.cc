// Ranks as real processes: every init method, a killed peer, a silent peer.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/shm_segment.h"
#include "common/socket.h"
#include "support/subprocess.h"

namespace cohort::testing {
namespace {

using std::chrono::seconds;

uint16_t free_port() {
  auto s = listen_tcp("", 0);
  return local_port(s.value().fd());
}

struct Job {
  std::vector<std::unique_ptr<Subprocess>> ranks;
  std::vector<std::string> output;
  std::vector<int> codes;
};

Job launch(int world, const std::string& mode, const std::string& init, int victim = -1,
           const std::vector<std::string>& extra_env = {}) {
  Job job;
  uint16_t port = free_port();
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv = {binary_path("tests/pg_worker"), mode, init, std::to_string(victim)};
    std::vector<std::string> env = {"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                    "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)};
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    job.ranks.push_back(std::make_unique<Subprocess>(argv, env));
  }
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    job.output.push_back(job.ranks[r]->read_all(seconds(60)));
    job.codes.push_back(job.ranks[r]->wait());
  }
  return job;
}

// segments_of lists the shared-memory names in /dev/shm made by `job`.
std::vector<std::string> segments_of(const Job& job) {
  std::vector<std::string> left;
  for (const std::string& name : live_segment_names()) {
    for (const auto& rank : job.ranks) {
      if (name.find("." + std::to_string(rank->pid()) + ".") != std::string::npos) left.push_back(name);
    }
  }
  return left;
}

void expect_all_ok(const Job& job) {
  for (size_t i = 0; i < job.codes.size(); ++i) {
    EXPECT_EQ(job.codes[i], 0) << job.output[i];
    EXPECT_NE(job.output[i].find(" ok"), std::string::npos) << job.output[i];
  }
}

TEST(ProcessGroupProcesses, EnvInitWithFourRanksAndASubgroup) {
  expect_all_ok(launch(4, "allreduce", "env://"));
}

TEST(ProcessGroupProcesses, TcpInit) {
  expect_all_ok(launch(3, "allreduce", "tcp://127.0.0.1:" + std::to_string(free_port())));
}

TEST(ProcessGroupProcesses, FileInit) {
  std::string path = "/tmp/cohort-pg-file-" + std::to_string(getpid());
  expect_all_ok(launch(3, "allreduce", "file://" + path));
  unlink(path.c_str());
}

TEST(ProcessGroupProcesses, KilledPeerIsANetworkErrorOnEverySurvivorNamingIt) {
  Job job = launch(4, "die", "env://", 2);
  expect_all_ok(job);
  for (const auto& out : job.output) {
    EXPECT_NE(out.find("NetworkError"), std::string::npos) << out;
    EXPECT_NE(out.find("rank 2"), std::string::npos) << "the message names the dead rank: " << out;
  }
}

TEST(ProcessGroupProcesses, NoSegmentIsLeftInDevShmAfterANormalRun) {
  Job job = launch(4, "allreduce", "env://");
  expect_all_ok(job);
  EXPECT_TRUE(segments_of(job).empty()) << segments_of(job).front();
}

TEST(ProcessGroupProcesses, RankKilledMidOperationFailsEverySurvivorWithNetworkError) {
  // Ranks on one host: the all_reduces run straight through shared memory,
  // where nothing but the dead rank's socket says it is gone.
  Job job;
  const int world = 3, victim = 1;
  uint16_t port = free_port();
  for (int r = 0; r < world; ++r) {
    job.ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{binary_path("tests/pg_worker"), "loop", "env://"},
        std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                 "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)}));
  }
  // Let them run collectives for a while, then kill one in the middle.
  EXPECT_NE(job.ranks[victim]->read_line(seconds(60)).find("ready"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  job.ranks[victim]->signal(SIGKILL);
  job.ranks[victim]->wait();
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    const std::string out = job.ranks[r]->read_all(seconds(60));
    EXPECT_EQ(job.ranks[r]->wait(), 0) << out;
    EXPECT_NE(out.find("ok: NetworkError"), std::string::npos) << out;
    EXPECT_NE(out.find("rank 1"), std::string::npos) << "the message names the dead rank: " << out;
  }
  EXPECT_TRUE(segments_of(job).empty()) << segments_of(job).front();
}

TEST(ProcessGroupProcesses, ASegmentLeftByACrashedRunIsRemovedByTheNextRun) {
  Subprocess crashed({binary_path("tests/pg_worker"), "stale", "-"}, {});
  std::string name = crashed.read_all(seconds(30));
  ASSERT_EQ(crashed.wait(), 0);
  name = name.substr(1, name.find('\n') - 1);  // without the leading '/'
  auto names = live_segment_names();
  ASSERT_NE(std::find(names.begin(), names.end(), name), names.end()) << name << " should be left behind";
  Job job = launch(2, "allreduce", "env://");
  expect_all_ok(job);
  names = live_segment_names();
  EXPECT_EQ(std::find(names.begin(), names.end(), name), names.end()) << name << " is still in /dev/shm";
}

TEST(ProcessGroupProcesses, DetailDebugMakesEveryProcessNameWhatEachRankCalled) {
  // Two hosts of two ranks: fingerprints cross both shared memory and TCP.
  Job job = launch(4, "desync", "env://", -1, {"COHORT_DEBUG=detail", "COHORT_SHM_RANKS_PER_HOST=2"});
  expect_all_ok(job);
  for (const auto& out : job.output) {
    EXPECT_NE(
        out.find(
            "ok: DesyncError: collective #1 of group default: ranks differ: ranks 0,2,3: "
            "all_reduce(float32, 1000 elements, SUM); rank 1: broadcast(float32, 1000 elements, root 0)\n"),
        std::string::npos)
        << out;
  }
}

TEST(ProcessGroupProcesses, SilentPeerIsATimeoutNamingOpGroupAndSequence) {
  Job job = launch(3, "silent", "env://", 1);
  expect_all_ok(job);
  bool someone_named_it = false;
  for (const auto& out : job.output) {
    EXPECT_NE(out.find("TimeoutError"), std::string::npos) << out;
    EXPECT_NE(out.find("all_reduce #1 of group default"), std::string::npos) << out;
    // A rank may time out waiting for another survivor that waits for the
    // silent rank; the relayed message carries both links of that chain.
    someone_named_it |= out.find("ranks [1]") != std::string::npos;
  }
  EXPECT_TRUE(someone_named_it) << "no survivor named the silent rank 1";
}

}  // namespace
}  // namespace cohort::testing
