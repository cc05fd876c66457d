// cohortrun with real worker processes: the environment workers see, output
// prefixes and log files, failures (exit code, signal, exception, hang),
// restarts, signals to the launcher, no worker outliving a killed launcher,
// and two standalone jobs on one host at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/ports.h"
#include "support/subprocess.h"

namespace cohort {
namespace {

using testing::binary_path;
using testing::Subprocess;
using namespace std::chrono_literals;

struct LaunchResult {
  int code = -1;
  std::string output;  // stdout and stderr together
};

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

// launch runs cohortrun with `flags`, then the test worker with `args`.
LaunchResult launch(const std::string& flags, const std::string& args, const std::string& env = "") {
  std::string cmd = "exec env COHORT_LAUNCHER_STOP_TIMEOUT_S=2 " + env + " " +
                    quote(binary_path("tools/cohortrun")) + " " + flags + " " +
                    quote(binary_path("tests/launch_worker")) + " " + args + " 2>&1";
  Subprocess p({"/bin/sh", "-c", cmd});
  LaunchResult r;
  r.output = p.read_all(100s);
  r.code = p.wait();
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool process_exists(pid_t pid) {
  return ::kill(pid, 0) == 0;
}

// wait_gone waits (bounded) for `pid` to exit; a zombie counts as gone
// because it runs nothing.
bool wait_gone(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    if (stat.empty() || stat.find(") Z") != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return !process_exists(pid);
}

TEST(LauncherTest, WorkersSeeTorchrunsEnvironment) {
  LaunchResult r =
      launch("--standalone --nproc-per-node 3 --max-restarts 2 --role trainer", "env --flag 'two words'");
  ASSERT_EQ(r.code, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string p = "[rank" + std::to_string(rank) + "]: ";
    for (std::string want :
         {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
          "ROLE_RANK=" + std::to_string(rank), std::string("GROUP_RANK=0"), std::string("WORLD_SIZE=3"),
          std::string("LOCAL_WORLD_SIZE=3"), std::string("ROLE_WORLD_SIZE=3"),
          std::string("GROUP_WORLD_SIZE=1"), std::string("ROLE_NAME=trainer"),
          std::string("MASTER_ADDR=127.0.0.1"), std::string("TORCHELASTIC_RESTART_COUNT=0"),
          std::string("COHORT_RESTART_COUNT=0"), std::string("TORCHELASTIC_MAX_RESTARTS=2"),
          std::string("COHORT_MAX_RESTARTS=2"), std::string("OMP_NUM_THREADS=1"),
          "local_rank()=" + std::to_string(rank) + " local_world_size()=3 args=[--flag][two words]"}) {
      EXPECT_NE(r.output.find(p + want + "\n"), std::string::npos) << want << " of rank " << rank << " in\n"
                                                                   << r.output;
    }
    EXPECT_NE(r.output.find(p + "TORCHELASTIC_ERROR_FILE=/"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find(p + "MASTER_PORT=29500\n"), std::string::npos)
        << "standalone must pick a free port";
  }
}

TEST(LauncherTest, UserOmpThreadsAndStaticMasterAreKept) {
  LaunchResult r =
      launch("--nproc_per_node 2 --master_addr 127.0.0.1 --master_port 29777", "env", "OMP_NUM_THREADS=7");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[rank1]: OMP_NUM_THREADS=7\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank1]: MASTER_PORT=29777\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank0]: TORCHELASTIC_RUN_ID=none\n"), std::string::npos) << r.output;
}

TEST(LauncherTest, BadFlagsExitWithUsageCode) {
  EXPECT_EQ(launch("--nnodes 3:2", "env").code, 2);
  EXPECT_EQ(launch("--redirects 7", "env").code, 2);
  LaunchResult r = launch("--rdzv-backend zookeeper --rdzv-endpoint h:1", "env");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("zookeeper"), std::string::npos) << r.output;
  Subprocess p({binary_path("tools/cohortrun"), "--standalone", "/no/such/program"});
  EXPECT_EQ(p.wait(), 4);
  r = launch("--master-port 99999", "env");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--master-port 99999 is out of range"), std::string::npos) << r.output;
}

TEST(LauncherTest, AProgramWithoutTheExecuteBitIsSaidToBeSo) {
  const std::string path = ::testing::TempDir() + "cohortrun_not_executable.sh";
  std::ofstream(path) << "#!/bin/sh\necho hi\n";
  Subprocess p({binary_path("tools/cohortrun"), "--standalone", path}, {}, true);
  const std::string out = p.read_all(20s);
  EXPECT_EQ(p.wait(), 4);
  EXPECT_NE(out.find("it is not executable (chmod +x " + path + ")"), std::string::npos) << out;
  std::remove(path.c_str());
}

TEST(ToolsTest, CohortBenchHelpSaysHowToUseItAndExitsZero) {
  Subprocess p({binary_path("tools/cohort-bench"), "--help"});
  const std::string out = p.read_all(20s);
  EXPECT_EQ(p.wait(), 0);
  EXPECT_NE(out.find("usage: cohort-bench COLLECTIVE"), std::string::npos) << out;
  EXPECT_NE(out.find("--spawn N"), std::string::npos) << out;
}

TEST(LauncherTest, TorchrunFlagsItCannotHonourAreRefusedByName) {
  for (const std::string flag :
       {"--numa-binding node", "--virtual-local-rank yes", "--logs-specs mine",
        "--duplicate-stdout-filters apple", "--duplicate_stderr_filters pear", "--event-log-handler console",
        "--start-method thread", "--signals-to-handle SIGSEGV", "--shutdown-timeout -3",
        "--no-such-flag 1"}) {
    LaunchResult r = launch("--standalone " + flag, "env");
    EXPECT_EQ(r.code, 2) << flag << "\n" << r.output;
    std::string name = flag.substr(0, flag.find(' '));
    std::replace(name.begin() + 2, name.end(), '_', '-');  // named as torchrun's help spells it
    EXPECT_NE(r.output.find(name), std::string::npos) << flag << "\n" << r.output;
  }
}

TEST(LauncherTest, TorchrunFlagsItHonourAreAccepted) {
  LaunchResult r = launch(
      "--standalone --nproc-per-node 2 --start-method fork --event-log-handler null "
      "--signals-to-handle SIGTERM,SIGINT,SIGUSR1 --shutdown-timeout 1 --use-env",
      "env");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[rank1]: LOCAL_RANK=1\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("argument --local-rank"), std::string::npos) << "cohortrun passes no --local-rank\n"
                                                                       << r.output;
}

// launch_as runs the test worker under tools/cohort-launch (cohortrun as
// torch.distributed.launch) with `flags`.
LaunchResult launch_as_torch_launch(const std::string& flags) {
  Subprocess p({"/bin/sh", "-c",
                "exec " + quote(binary_path("tools/cohort-launch")) + " --standalone --nproc-per-node 2 " +
                    flags + " " + quote(binary_path("tests/launch_worker")) + " env 2>&1"});
  LaunchResult r;
  r.output = p.read_all(100s);
  r.code = p.wait();
  return r;
}

TEST(LauncherTest, CohortLaunchPassesLocalRankAsTorchDistributedLaunchDoesUnlessUseEnv) {
  LaunchResult r = launch_as_torch_launch("");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[rank0]: argument --local-rank=0\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank1]: argument --local-rank=1\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank1]: LOCAL_RANK=1\n"), std::string::npos) << r.output;
  r = launch_as_torch_launch("--use-env");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("argument --local-rank"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank1]: LOCAL_RANK=1\n"), std::string::npos) << r.output;
}

TEST(LauncherTest, FailingExitCodeStopsTheOthersAndNamesTheRootCause) {
  LaunchResult r = launch("--standalone --nproc-per-node 3", "exit 1 7");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("Root Cause (first observed failure):\n[0]:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank      : 1 (local_rank: 1)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exitcode  : 7"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("<NO_OTHER_FAILURES>"), std::string::npos) << "the stopped ranks are no failures\n"
                                                                     << r.output;
}

TEST(LauncherTest, RanksThatFailOnTheirOwnWhileStoppingAreOtherFailures) {
  LaunchResult r = launch("--standalone --nproc-per-node 3", "throw_all 1 first-failure");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(r.output.find("<NO_OTHER_FAILURES>"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed after rank 1"), std::string::npos) << r.output;
  const size_t root = r.output.find("Root Cause (first observed failure):");
  ASSERT_NE(root, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("first-failure", root), std::string::npos) << r.output;
  // The error files lived in the launcher's temporary folder: said so.
  EXPECT_NE(r.output.find("(removed at exit; --log-dir keeps it)"), std::string::npos) << r.output;
}

TEST(LauncherTest, AWorkerThatWroteNoErrorFileShowsNA) {
  LaunchResult r = launch("--standalone --nproc-per-node 2", "exit 0 7");
  EXPECT_NE(r.output.find("error_file: <N/A>"), std::string::npos) << r.output;
}

TEST(LauncherTest, WorkerKilledBySignalIsNamed) {
  LaunchResult r = launch("--standalone --nproc-per-node 2", "signal 0 9");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("exitcode  : -9 (SIGKILL)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Signal 9 (SIGKILL) received by PID"), std::string::npos) << r.output;
}

TEST(LauncherTest, UncaughtExceptionReachesTheSummaryThroughTheErrorFile) {
  std::string logs = ::testing::TempDir() + "/launcher_errfile_" + std::to_string(getpid());
  std::filesystem::remove_all(logs);
  LaunchResult r =
      launch("--rdzv-id job7 --log-dir " + logs + " --nproc-per-node 2", "throw 1 'disk quota \"exceeded\"'");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("traceback : std::runtime_error: disk quota \"exceeded\""), std::string::npos)
      << r.output;
  std::string doc = read_file(logs + "/job7/attempt_0/1/error.json");
  EXPECT_EQ(doc.rfind("{\"message\": {\"message\": \"std::runtime_error: disk quota \\\"exceeded\\\"\", "
                      "\"extraInfo\": {\"py_callstack\": \"",
                      0),
            0u)
      << doc;
  EXPECT_NE(doc.find("throw_from_here"), std::string::npos) << "the stack names the throwing function\n"
                                                            << doc;
  EXPECT_NE(doc.find("\"timestamp\": \""), std::string::npos) << doc;
  std::filesystem::remove_all(logs);
}

TEST(LauncherTest, HangingWorkerIsKilledAfterTheGracePeriod) {
  // Rank 0 ignores SIGTERM; rank 1 fails, so the launcher stops rank 0 and
  // must escalate to SIGKILL.
  LaunchResult r = launch("--standalone --nproc-per-node 2", "hang 0");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("[rank0]: ignoring SIGTERM"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank      : 1 (local_rank: 1)"), std::string::npos) << r.output;
}

TEST(LauncherTest, RestartsUntilTheProgramSucceeds) {
  LaunchResult r = launch("--standalone --nproc-per-node 2 --max-restarts 3", "fail_until 2");
  EXPECT_EQ(r.code, 0) << r.output;
  // Both ranks fail each failed attempt; the first to fail gets the other
  // stopped, maybe before it spoke. So each attempt is heard from at least
  // one rank, and the last, successful one from both.
  for (int n = 0; n <= 1; ++n) {
    const std::string line = "]: attempt with restart count " + std::to_string(n);
    EXPECT_TRUE(r.output.find("[rank0" + line) != std::string::npos ||
                r.output.find("[rank1" + line) != std::string::npos)
        << r.output;
  }
  EXPECT_NE(r.output.find("[rank0]: attempt with restart count 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank1]: attempt with restart count 2"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("restart count 3"), std::string::npos) << r.output;
}

TEST(LauncherTest, RestartsUpToTheLimitThenFails) {
  LaunchResult r = launch("--standalone --nproc-per-node 1 --max-restarts 2", "fail_until 5");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("attempt with restart count 2"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("attempt with restart count 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exitcode  : 3"), std::string::npos) << r.output;
}

TEST(LauncherTest, LogDirKeepsEachRanksStreamsAndRedirectsHideThem) {
  std::string logs = ::testing::TempDir() + "/launcher_logs_" + std::to_string(getpid());
  std::filesystem::remove_all(logs);
  // Local rank 0: stdout to the file only; rank 1: both streams shown.
  LaunchResult r =
      launch("--rdzv-id run9 --log-dir " + logs + " --nproc-per-node 2 --redirects 0:1", "print 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("[rank0]: out 0 of rank 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank0]: err 1 of rank 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank1]: out 1 of rank 1"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(logs + "/run9/attempt_0/0/stdout.log"), "out 0 of rank 0\nout 1 of rank 0\n");
  EXPECT_EQ(read_file(logs + "/run9/attempt_0/1/stderr.log"), "err 0 of rank 1\nerr 1 of rank 1\n");
  // --tee shows a redirected stream after all; the filter hides rank 1.
  r = launch("--rdzv-id run9 --log-dir " + logs + " --nproc-per-node 2 -r 3 -t 1 --local-ranks-filter 0",
             "print 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[rank0]: out 0 of rank 0"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank0]: err 0"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank1]"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(logs + "/run9/attempt_0/1/stderr.log"), "err 0 of rank 1\n");
  std::filesystem::remove_all(logs);
}

// pids_of reads "pid <worker> <grandchild>" lines of the sleep mode.
std::vector<pid_t> pids_of(Subprocess& p, int workers) {
  std::vector<pid_t> pids;
  while (static_cast<int>(pids.size()) < 2 * workers) {
    std::string line = p.read_line(30s);
    if (line.empty()) break;
    auto at = line.find("pid ");
    if (at == std::string::npos) continue;
    int a = 0, b = 0;
    if (std::sscanf(line.c_str() + at, "pid %d %d", &a, &b) == 2) pids.insert(pids.end(), {a, b});
  }
  return pids;
}

TEST(LauncherTest, LauncherKilledWithSigkillLeavesNoWorkerNorAnyProcessAWorkerStarted) {
  // A killed launcher cannot remove its folder of error files: give it one
  // this test removes.
  const std::string logs = ::testing::TempDir() + "/cohortrun_sigkill_" + std::to_string(::getpid());
  Subprocess p({binary_path("tools/cohortrun"), "--standalone", "--nproc-per-node", "2", "--log-dir", logs,
                binary_path("tests/launch_worker"), "sleep"});
  auto pids = pids_of(p, 2);
  ASSERT_EQ(pids.size(), 4u);
  for (pid_t pid : pids) EXPECT_TRUE(process_exists(pid));
  p.signal(SIGKILL);
  p.wait();
  // The workers die with their launcher (parent-death signal), their
  // children by the launcher's helper, which outlives it (orphan_reaper.h).
  for (pid_t pid : pids) EXPECT_TRUE(wait_gone(pid)) << "pid " << pid << " outlived the launcher";
  std::filesystem::remove_all(logs);
}

TEST(LauncherTest, LauncherKilledWithSigkillLeavesNothingAWrapperWorkerStarted) {
  // The worker is a shell that runs the real one: the shell dies with the
  // launcher, and what it started must not be left running under init.
  const std::string logs = ::testing::TempDir() + "/cohortrun_wrapper_" + std::to_string(::getpid());
  Subprocess p({binary_path("tools/cohortrun"), "--standalone", "--nproc-per-node", "2", "--log-dir", logs,
                "/bin/sh", "-c", quote(binary_path("tests/launch_worker")) + " sleep; echo done"});
  auto pids = pids_of(p, 2);  // the real workers and their children, not the shells
  ASSERT_EQ(pids.size(), 4u);
  p.signal(SIGKILL);
  p.wait();
  for (pid_t pid : pids) EXPECT_TRUE(wait_gone(pid)) << "pid " << pid << " outlived the launcher";
  std::filesystem::remove_all(logs);
}

TEST(LauncherTest, ABackgroundLaunchersSigintStopsWorkersThatInheritedItIgnored) {
  // A script's background job starts with SIGINT ignored, and so would its
  // workers: the stop signal must still stop them, long before the 30 s
  // after which SIGKILL would.
  Subprocess p(
      {"/bin/sh", "-c",
       "trap '' INT; exec " + quote(binary_path("tools/cohortrun")) + " --standalone --nproc-per-node 2 " +
           quote(binary_path("tests/launch_worker")) + " sleep"},
      {"COHORT_LAUNCHER_STOP_TIMEOUT_S=30"});
  auto pids = pids_of(p, 2);
  ASSERT_EQ(pids.size(), 4u);
  p.signal(SIGINT);
  for (pid_t pid : pids)
    EXPECT_TRUE(wait_gone(pid)) << "pid " << pid << " still runs after the launcher's SIGINT";
  EXPECT_EQ(p.wait(), 128 + SIGINT);
}

TEST(LauncherTest, SigtermToTheLauncherReachesWorkersAndTheirChildren) {
  Subprocess p({binary_path("tools/cohortrun"), "--standalone", "--nproc-per-node", "2",
                binary_path("tests/launch_worker"), "sleep"},
               {"COHORT_LAUNCHER_STOP_TIMEOUT_S=5"});
  auto pids = pids_of(p, 2);
  ASSERT_EQ(pids.size(), 4u);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 128 + SIGTERM);
  for (pid_t pid : pids) EXPECT_TRUE(wait_gone(pid)) << "pid " << pid << " outlived the launcher";
}

TEST(LauncherTest, TwoStandaloneJobsRunTogetherOnOneHost) {
  auto job = [] {
    return std::make_unique<Subprocess>(std::vector<std::string>{
        "/bin/sh", "-c",
        "exec " + binary_path("tools/cohortrun") + " --standalone --nproc-per-node 2 " +
            binary_path("tests/launch_worker") + " steps 10 2>&1"});
  };
  auto a = job();
  auto b = job();
  std::string out_a = a->read_all(100s), out_b = b->read_all(100s);
  EXPECT_EQ(a->wait(), 0) << out_a;
  EXPECT_EQ(b->wait(), 0) << out_b;
  for (const auto& out : {out_a, out_b}) {
    EXPECT_NE(out.find("[rank0]: ok rank 0 of 2"), std::string::npos) << out;
    EXPECT_NE(out.find("[rank1]: ok rank 1 of 2"), std::string::npos) << out;
  }
}

TEST(LauncherTest, TwoJobsStartedTogetherOnOneMasterPortNeverMix) {
  // Two static launches on one --master-port: one job's rank 0 gets the
  // port and that job runs; the other's rank 0 cannot listen, and its rank
  // 1, should it reach the first job's store, is refused there naming both
  // jobs (each launcher names its job). No worker runs in the other's job.
  // The workers run 30 steps of 100 ms: the job that wins holds the port
  // for 3 s, so the two overlap however slowly the other starts (with one
  // short step, a job under ASan could finish and free the port before
  // the other had started, and both then ran, one after the other).
  const std::string port = std::to_string(testing::free_port());
  auto job = [&] {
    return std::make_unique<Subprocess>(std::vector<std::string>{
        "/bin/sh", "-c",
        "exec env COHORT_LAUNCHER_STOP_TIMEOUT_S=2 " + binary_path("tools/cohortrun") +
            " --nproc-per-node 2 --master-addr 127.0.0.1 --master-port " + port + " " +
            binary_path("tests/launch_worker") + " steps 30 2>&1"});
  };
  auto a = job();
  auto b = job();
  std::string out_a = a->read_all(100s), out_b = b->read_all(100s);
  const int code_a = a->wait(), code_b = b->wait();
  ASSERT_NE(code_a == 0, code_b == 0) << "exactly one job runs:\n" << out_a << "\n---\n" << out_b;
  const std::string& won = code_a == 0 ? out_a : out_b;
  const std::string& lost = code_a == 0 ? out_b : out_a;
  EXPECT_NE(won.find("[rank0]: ok rank 0 of 2"), std::string::npos) << won;
  EXPECT_NE(won.find("[rank1]: ok rank 1 of 2"), std::string::npos) << won;
  EXPECT_EQ(lost.find("]: ok rank"), std::string::npos) << "a worker ran in the other job:\n" << lost;
  const size_t refused = lost.find("two jobs on one store");
  if (refused != std::string::npos) {
    EXPECT_NE(lost.find("is of job "), std::string::npos) << lost;
  }
}

TEST(LauncherTest, ProcessGroupJobOfFourWorkers) {
  LaunchResult r = launch("--standalone --nproc-per-node 4", "pg");
  ASSERT_EQ(r.code, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(r.output.find("[rank" + std::to_string(rank) + "]: ok rank " + std::to_string(rank) + " of 4"),
              std::string::npos)
        << r.output;
}

}  // namespace
}  // namespace cohort
