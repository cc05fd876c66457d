// The flight recorder and the stall inspector with ranks as real
// processes: dumps on timeout and on SIGUSR1, cohort-trace's verdict, and
// warnings that name a late rank.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "common/socket.h"
#include "diagnostics/trace_dump.h"
#include "support/subprocess.h"

namespace cohort::testing {
namespace {

using std::chrono::seconds;

// TraceJob is a job of pg_worker ranks with a trace directory of its own.
class TraceJob {
 public:
  TraceJob(int world, const std::string& mode, int victim, std::vector<std::string> env) {
    char dir[] = "/tmp/cohort-trace-job-XXXXXX";
    if (mkdtemp(dir)) dir_ = dir;
    const uint16_t port = local_port(listen_tcp("", 0).value().fd());  // free once the socket closes
    env.push_back("COHORT_TRACE_DIR=" + dir_);
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    env.push_back("WORLD_SIZE=" + std::to_string(world));
    for (int r = 0; r < world; ++r) {
      std::vector<std::string> rank_env = env;
      rank_env.push_back("RANK=" + std::to_string(r));
      ranks.push_back(std::make_unique<Subprocess>(
          std::vector<std::string>{binary_path("tests/pg_worker"), mode, "env://", std::to_string(victim)},
          rank_env, /*merge_stderr=*/true));
    }
  }
  ~TraceJob() {
    ranks.clear();  // kills what is left
    for (const char* f : {"/rank_0.json", "/rank_1.json", "/rank_2.json"}) unlink((dir_ + f).c_str());
    rmdir(dir_.c_str());
  }

  const std::string& dir() const { return dir_; }
  bool has_dump(int rank) const {
    struct stat st;
    return stat((dir_ + "/rank_" + std::to_string(rank) + ".json").c_str(), &st) == 0;
  }
  std::string read_dump(int rank) const {
    std::ifstream in(dir_ + "/rank_" + std::to_string(rank) + ".json");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // cohort_trace runs the tool on the directory; returns its output.
  std::string cohort_trace(int* code) const {
    Subprocess tool({binary_path("tools/cohort-trace"), dir_});
    std::string out = tool.read_all(seconds(30));
    *code = tool.wait();
    return out;
  }

  std::vector<std::unique_ptr<Subprocess>> ranks;

 private:
  std::string dir_;
};

TEST(TraceProcesses, TimedOutRanksDumpASignalledRankDumpsAndCohortTraceNamesTheRankThatNeverStarted) {
  TraceJob job(3, "late", 1, {});
  ASSERT_NE(job.ranks[1]->read_line(seconds(60)).find("rank 1 idle"), std::string::npos);
  for (int r : {0, 2}) {
    const std::string out = job.ranks[r]->read_all(seconds(60));
    EXPECT_EQ(job.ranks[r]->wait(), 0) << out;
    EXPECT_NE(out.find("rank " + std::to_string(r) + " ok"), std::string::npos) << out;
    // The dump is on disk before the failing call returned.
    EXPECT_TRUE(job.has_dump(r)) << out;
  }
  EXPECT_FALSE(job.has_dump(1)) << "rank 1 has not failed and was not signalled";
  job.ranks[1]->signal(SIGUSR1);
  for (int i = 0; i < 200 && !job.has_dump(1); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(job.has_dump(1)) << "SIGUSR1 made no dump in 10 s";
  EXPECT_TRUE(job.ranks[1]->alive()) << "SIGUSR1 must not end the rank";
  auto dump = parse_rank_dump(job.read_dump(1));
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  EXPECT_EQ(dump.value().reason, "SIGUSR1");
  ASSERT_EQ(dump.value().groups.size(), 1u);
  EXPECT_EQ(dump.value().groups[0].collectives.completed, 4u);
  EXPECT_EQ(dump.value().groups[0].collectives.enqueued, 4u);
  auto failed = parse_rank_dump(job.read_dump(0));
  ASSERT_TRUE(failed.ok()) << failed.status().message();
  EXPECT_NE(failed.value().reason.find("group default failed: "), std::string::npos) << failed.value().reason;

  int code = 0;
  const std::string verdict = job.cohort_trace(&code);
  EXPECT_EQ(code, 1) << verdict;
  EXPECT_NE(verdict.find("\ngroup default collective #5 (all_reduce, 4 MiB float32): ranks {1} never started "
                         "it; rank 1's last completed is #4\n"),
            std::string::npos)
      << verdict;
}

TEST(TraceProcesses, AStoppedRankLeavesNoDumpAndCohortTraceSaysSo) {
  TraceJob job(3, "silent", 1, {});
  for (int r : {0, 2}) {
    const std::string out = job.ranks[r]->read_all(seconds(60));
    EXPECT_EQ(job.ranks[r]->wait(), 0) << out;
  }
  int code = 0;
  const std::string verdict = job.cohort_trace(&code);
  EXPECT_EQ(code, 1) << verdict;
  EXPECT_NE(verdict.find("read 2 dumps from " + job.dir() + " (ranks {0,2})\nranks {1} left no dump"),
            std::string::npos)
      << verdict;
  EXPECT_NE(verdict.find("group default collective #1 (all_reduce, 256 KiB float32): every rank that left a "
                         "dump started it and none completed it"),
            std::string::npos)
      << verdict;
}

TEST(StallProcesses, ALateRankIsNamedInAWarningAndTheCollectiveStillCompletes) {
  TraceJob job(3, "stall", 1, {"COHORT_STALL_WARN_S=0.5"});
  for (int r : {0, 2}) {
    const std::string out = job.ranks[r]->read_all(seconds(60));
    EXPECT_EQ(job.ranks[r]->wait(), 0) << out;
    EXPECT_NE(out.find("rank " + std::to_string(r) + " ok: all_reduce #2 completed"), std::string::npos)
        << out;
    EXPECT_NE(out.find("all_reduce #2 of group default (4 B float32) has been pending for"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("ranks [1] have not joined it (rank 1 last started #"), std::string::npos) << out;
  }
  const std::string late = job.ranks[1]->read_all(seconds(60));
  EXPECT_EQ(job.ranks[1]->wait(), 0) << late;
  EXPECT_EQ(late.find("have not joined"), std::string::npos) << "rank 1 waited for nobody: " << late;
}

}  // namespace
}  // namespace cohort::testing
