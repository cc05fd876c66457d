// Ranks as real processes: every init method, a killed peer, a silent peer.
#include <gtest/gtest.h>
#include <unistd.h>

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

Job launch(int world, const std::string& mode, const std::string& init, int victim = -1) {
  Job job;
  uint16_t port = free_port();
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv = {binary_path("tests/pg_worker"), mode, init, std::to_string(victim)};
    std::vector<std::string> env = {"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                    "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)};
    job.ranks.push_back(std::make_unique<Subprocess>(argv, env));
  }
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    job.output.push_back(job.ranks[r]->read_all(seconds(60)));
    job.codes.push_back(job.ranks[r]->wait());
  }
  return job;
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
