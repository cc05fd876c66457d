// Ranks as real processes: every init method, a killed peer, a silent or
// stopped peer, the store's host killed, and shrinking a group after a kill.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include "common/shm_segment.h"
#include "common/socket.h"
#include "support/ports.h"
#include "support/subprocess.h"

namespace cohort::testing {
namespace {

using std::chrono::seconds;

struct Job {
  std::vector<std::unique_ptr<Subprocess>> ranks;
  std::vector<std::string> output;
  std::vector<int> codes;
};

// start starts `world` pg_worker ranks in `mode` and returns at once;
// with `merge_stderr` their logs are part of their output.
Job start(int world, const std::string& mode, const std::string& init = "env://", int victim = -1,
          const std::vector<std::string>& extra_env = {}, bool merge_stderr = false) {
  Job job;
  uint16_t port = free_port();
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv = {binary_path("tests/pg_worker"), mode, init, std::to_string(victim)};
    std::vector<std::string> env = {"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                    "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)};
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    job.ranks.push_back(std::make_unique<Subprocess>(argv, env, merge_stderr));
  }
  return job;
}

Job launch(int world, const std::string& mode, const std::string& init, int victim = -1,
           const std::vector<std::string>& extra_env = {}, bool merge_stderr = false) {
  Job job = start(world, mode, init, victim, extra_env, merge_stderr);
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

// Separate processes map the symmetric segment at addresses of their own:
// what the ranks-as-threads tests cannot tell apart from one address space.
// The ranks of a host share memory with no TCP connection between them,
// eager or lazy: two pretend hosts of two ranks, where each rank connects
// over TCP to the other host's two ranks only.
void expect_shared_memory_within_and_tcp_between(const Job& job, bool lazy) {
  for (int r = 0; r < 4; ++r) {
    const std::string& out = job.output[static_cast<size_t>(r)];
    const int mate = r ^ 1;
    for (int q = 0; q < 4; ++q) {
      if (q == r) continue;
      const std::string line_start = "rank " + std::to_string(r) + " talks to rank " + std::to_string(q) + " (";
      const size_t at = out.find(line_start);
      ASSERT_NE(at, std::string::npos) << out;
      const std::string line = out.substr(at, out.find('\n', at) - at);
      const bool same_host = q == mate;
      EXPECT_NE(line.find(same_host ? "over shared memory" : "over TCP"), std::string::npos) << line;
    }
    if (!lazy) {
      EXPECT_NE(out.find("rank " + std::to_string(r) + " connected to 2 peers over TCP"), std::string::npos)
          << out;
    }
  }
}

TEST(ProcessGroupProcesses, AHostsRanksShareMemoryWithNoTcpConnectionBetweenThem) {
  Job job =
      launch(4, "allreduce", "env://", -1, {"COHORT_LOG_LEVEL=debug", "COHORT_SHM_RANKS_PER_HOST=2"}, true);
  expect_all_ok(job);
  expect_shared_memory_within_and_tcp_between(job, false);
  EXPECT_TRUE(segments_of(job).empty()) << "a doorbell or segment is left: " << segments_of(job).front();
}

TEST(ProcessGroupProcesses, ALazyGroupSharesMemoryWithinAHostAndConnectsTheOthersOnFirstUse) {
  Job job = launch(4, "allreduce", "env://", -1,
                   {"COHORT_LOG_LEVEL=debug", "COHORT_SHM_RANKS_PER_HOST=2", "COHORT_TCP_CONNECT=lazy"}, true);
  expect_all_ok(job);
  expect_shared_memory_within_and_tcp_between(job, true);
  for (const std::string& out : job.output) {
    // Before, a lazy group had no shared memory at all.
    EXPECT_NE(out.find("2 hosts, shared memory within hosts"), std::string::npos) << out;
  }
}

TEST(ProcessGroupProcesses, SymmetricMemoryIsSharedBetweenProcessesAndLeavesNoSegment) {
  Job job = launch(3, "symmetric", "env://");
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

TEST(ProcessGroupProcesses, ARelayedDesyncReadsRightOnTheRankThatReadsIt) {
  // Rank 1 (in broadcast) sees rank 0's all_reduce message and says so in
  // its words; rank 0 reads the relayed reason in its own.
  Job job = launch(2, "desync", "env://");
  expect_all_ok(job);
  EXPECT_NE(job.output[1].find("DesyncError: rank 0 is in all_reduce #1 while this rank is in broadcast #1"),
            std::string::npos)
      << job.output[1];
  EXPECT_NE(
      job.output[0].find("DesyncError: this rank (0) is in all_reduce #1 while rank 1 is in broadcast #1"),
      std::string::npos)
      << job.output[0];
  EXPECT_NE(job.output[0].find("(reported by rank 1)"), std::string::npos) << job.output[0];
}

TEST(ProcessGroupProcesses, ARankThatSkippedACollectiveHearsItWhenItEndsItsJob) {
  Job job = launch(2, "skip", "env://");
  expect_all_ok(job);
  EXPECT_NE(job.output[1].find("rank 1 ok: DesyncError: destroy_process_group: the final barrier found that "
                               "the ranks' calls differ"),
            std::string::npos)
      << job.output[1];
  EXPECT_NE(job.output[1].find("all_reduce #1"), std::string::npos)
      << "names what it skipped: " << job.output[1];
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

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// await_ready reads each rank's "ready" line (its first operation is done).
bool await_ready(Job& job) {
  for (auto& rank : job.ranks) {
    if (rank->read_line(seconds(60)).find("ready") == std::string::npos) return false;
  }
  return true;
}

// caught_at parses "rank R ok: CLASS at NS: ..." (pg_worker's caught()).
long long caught_at(const std::string& out, const std::string& what) {
  const std::string marker = "ok: " + what + " at ";
  const size_t at = out.find(marker);
  return at == std::string::npos ? -1 : std::atoll(out.c_str() + at + marker.size());
}

// The issue's bound: every survivor knows of a dead peer within 2 s. Not a
// speed measurement: detection takes milliseconds, so only a lost or
// ignored failure signal (a survivor left to its 3 s timeout, or hung)
// can cross it, however loaded the machine.
constexpr long long kDetectionBoundNs = 2'000'000'000;

// The 64 MiB all_reduces' own timeout (pg_worker's big mode): 3 s, longer
// under the sanitizers, where one such all_reduce over TCP can take that.
#ifdef COHORT_SANITIZED_BUILD
constexpr int kBigOpTimeoutS = 30;
#else
constexpr int kBigOpTimeoutS = 3;
#endif
const std::string kBigOpTimeoutEnv = "PG_WORKER_OP_TIMEOUT_S=" + std::to_string(kBigOpTimeoutS);

// kill_during_big_all_reduces runs `repeats` jobs of 4 ranks doing 64 MiB
// all_reduces, kills one rank (each in turn) in the middle of one, and
// checks that every survivor gets NetworkError naming it within the bound,
// and that its next operation fails too. Prints the detection times.
void kill_during_big_all_reduces(int repeats, const std::vector<std::string>& env, const char* label) {
  const int world = 4;
  std::mt19937 random(42);
  std::vector<double> detection_ms;
  for (int run = 0; run < repeats; ++run) {
    const int victim = run % world;
    std::vector<std::string> job_env = env;
    job_env.push_back(kBigOpTimeoutEnv);
    Job job = start(world, "big", "env://", -1, job_env);
    if (!await_ready(job)) {
      ADD_FAILURE() << "run " << run << ": the ranks did not start";
      return;
    }
    // Somewhere in the middle of one of the 64 MiB all_reduces.
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 150));
    const long long killed_at = wall_ns();
    job.ranks[victim]->signal(SIGKILL);
    for (int r = 0; r < world; ++r) {
      if (r == victim) continue;
      const std::string out = job.ranks[r]->read_all(seconds(60));
      EXPECT_EQ(job.ranks[r]->wait(), 0) << out;
      const long long at = caught_at(out, "NetworkError");
      if (at <= 0) {
        ADD_FAILURE() << "run " << run << ", rank " << r << " did not get NetworkError:\n" << out;
        continue;
      }
      EXPECT_LT(at - killed_at, kDetectionBoundNs) << "run " << run << ", rank " << r << ":\n" << out;
      EXPECT_NE(out.find("rank " + std::to_string(victim) + " ("), std::string::npos)
          << "run " << run << ", rank " << r << " does not name the dead rank " << victim << ":\n"
          << out;
      EXPECT_NE(out.find("next operation failed"), std::string::npos) << out;
      detection_ms.push_back(static_cast<double>(at - killed_at) / 1e6);
    }
    job.ranks[victim]->wait();
    EXPECT_TRUE(segments_of(job).empty()) << "run " << run << ": " << segments_of(job).front();
  }
  std::sort(detection_ms.begin(), detection_ms.end());
  if (!detection_ms.empty()) {
    std::printf("kill detection %s over %d runs (%zu survivors): median %.1f ms, p90 %.1f ms, max %.1f ms\n",
                label, repeats, detection_ms.size(), detection_ms[detection_ms.size() / 2],
                detection_ms[detection_ms.size() * 9 / 10], detection_ms.back());
    std::fflush(stdout);  // before the next test forks its ranks
  }
}

// COHORT_KILL_REPEATS overrides the count (bench/kill_detection.sh: 50).
int kill_repeats(int default_count) {
  const char* env = std::getenv("COHORT_KILL_REPEATS");
  return env ? std::atoi(env) : default_count;
}

TEST(ProcessGroupFailures, KillDuring64MiBAllReduceFailsEverySurvivorWithNetworkErrorWithin2s) {
  // One host: shared memory, where only the dead rank's socket tells.
  kill_during_big_all_reduces(kill_repeats(20), {}, "over shared memory");
}

TEST(ProcessGroupFailures, KillDuring64MiBSymmetricAllReduceFailsEverySurvivorWithin2s) {
  // The ranks read and write each other's blocks with plain loads and stores.
  kill_during_big_all_reduces(kill_repeats(5), {"PG_WORKER_SYMMETRIC=1"}, "in symmetric memory");
}

TEST(ProcessGroupFailures, KillDuring64MiBAllReduceOverTcpFailsEverySurvivorWithin2s) {
  kill_during_big_all_reduces(kill_repeats(5), {"COHORT_SHM=off"}, "over TCP");
}

// Blocking send and recv run on the caller's thread when the group is idle:
// a dead or silent peer must end them as it ends a queued one.
TEST(ProcessGroupFailures, KillDuringBlockingPingPongFailsTheOtherRankWithin2s) {
  Job job = start(2, "pingpong");
  ASSERT_TRUE(await_ready(job));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const long long killed_at = wall_ns();
  job.ranks[1]->signal(SIGKILL);
  const std::string out = job.ranks[0]->read_all(seconds(60));
  EXPECT_EQ(job.ranks[0]->wait(), 0) << out;
  const long long at = caught_at(out, "NetworkError");
  ASSERT_GT(at, 0) << out;
  EXPECT_LT(at - killed_at, kDetectionBoundNs) << out;
  EXPECT_NE(out.find("rank 1 ("), std::string::npos) << "does not name the dead rank:\n" << out;
  job.ranks[1]->wait();
  EXPECT_TRUE(segments_of(job).empty()) << segments_of(job).front();
}

TEST(ProcessGroupFailures, StoppedPeerOfABlockingRecvIsATimeoutNamingTheCall) {
  Job job = launch(2, "pingpong", "env://", 1);
  ASSERT_EQ(job.output.size(), 1u);
  const std::string& out = job.output[0];
  EXPECT_EQ(job.codes[0], 0) << out;
  EXPECT_GT(caught_at(out, "TimeoutError"), 0) << out;
  // Rank 0's small send completes into the ring; its recv waits.
  EXPECT_NE(out.find("recv from 1 tag 0 (p2p #"), std::string::npos) << out;
  EXPECT_NE(out.find("of group default"), std::string::npos) << out;
}

// The stopped rank's test waits out the whole timeout: under the sanitizers
// its all_reduces are 1 MiB, which keep within 3 s there, instead of 64 MiB
// with a 30 s timeout (it checks the timeout's report, not the big path).
#ifdef COHORT_SANITIZED_BUILD
const std::vector<std::string> kStoppedRankEnv = {"PG_WORKER_OP_TIMEOUT_S=3", "PG_WORKER_BIG_FLOATS=262144"};
constexpr int kStoppedRankTimeoutS = 3;
#else
const std::vector<std::string> kStoppedRankEnv = {kBigOpTimeoutEnv};
constexpr int kStoppedRankTimeoutS = kBigOpTimeoutS;
#endif

TEST(ProcessGroupFailures, StoppedRankIsATimeoutErrorAtTheTimeoutNamingIt) {
  const int world = 4, victim = 2;
  Job job = start(world, "big", "env://", -1, kStoppedRankEnv);
  ASSERT_TRUE(await_ready(job));
  const long long stopped_at = wall_ns();
  job.ranks[victim]->signal(SIGSTOP);
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    const std::string out = job.ranks[r]->read_all(seconds(60));
    EXPECT_EQ(job.ranks[r]->wait(), 0) << out;
    const long long at = caught_at(out, "TimeoutError");
    ASSERT_GT(at, 0) << "rank " << r << " did not get TimeoutError:\n" << out;
    // The operation's timeout counts from its start, which was before the
    // stop: never later than that after it, plus the bound for reporting.
    EXPECT_LT(at - stopped_at, kStoppedRankTimeoutS * 1'000'000'000LL + kDetectionBoundNs) << out;
    EXPECT_TRUE(out.find("ranks [2]") != std::string::npos || out.find("rank 2 (") != std::string::npos)
        << "rank " << r << " does not name rank 2:\n"
        << out;
  }
  job.ranks[victim]->signal(SIGKILL);
  job.ranks[victim]->wait();
}

TEST(ProcessGroupFailures, KilledStoreHostIsAStoreErrorOnTheOthersWithin2s) {
  const int world = 3;
  Job job = start(world, "store");
  ASSERT_TRUE(await_ready(job));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // into their wait
  const long long killed_at = wall_ns();
  job.ranks[0]->signal(SIGKILL);
  for (int r = 1; r < world; ++r) {
    const std::string out = job.ranks[r]->read_all(seconds(60));
    EXPECT_EQ(job.ranks[r]->wait(), 0) << out;
    const long long at = caught_at(out, "StoreError");
    ASSERT_GT(at, 0) << "rank " << r << " did not get StoreError:\n" << out;
    // Named from the reader's side: whom it lost, not "?".
    EXPECT_NE(out.find("lost the store server at 127.0.0.1:"), std::string::npos) << out;
    EXPECT_NE(out.find(", hosted by rank 0 (its process exited or was killed"), std::string::npos) << out;
    EXPECT_LT(at - killed_at, kDetectionBoundNs) << out;
  }
  job.ranks[0]->wait();
}

TEST(ProcessGroupFailures, SurvivorsShrinkTheDefaultGroupAfterAKillAndAllReduceAmongThemselves) {
  const int world = 4, victim = 2;
  Job job = start(world, "shrink");
  ASSERT_TRUE(await_ready(job));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  job.ranks[victim]->signal(SIGKILL);
  job.ranks[victim]->wait();
  // Old ranks 0, 1, 3 become 0, 1, 2; the all_reduce sums old rank + 1.
  const int new_rank[] = {0, 1, -1, 2};
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    const std::string out = job.ranks[r]->read_all(seconds(60));
    EXPECT_EQ(job.ranks[r]->wait(), 0) << out;
    const std::string want = "rank " + std::to_string(r) + " ok: shrunk to rank " +
                             std::to_string(new_rank[r]) + " of 3 (default group: rank " +
                             std::to_string(new_rank[r]) + " of 3), sum 7";
    EXPECT_NE(out.find(want), std::string::npos) << "wanted '" << want << "' in:\n" << out;
  }
  EXPECT_TRUE(segments_of(job).empty()) << segments_of(job).front();
}

}  // namespace
}  // namespace cohort::testing
