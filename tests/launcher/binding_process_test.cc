// Binding ranks to CPUs with real processes: cohortrun's --bind (each
// worker's affinity as the worker itself reads it), its refusal of a binding
// that cannot fit, the narrower affinity it was started under (taskset), a
// rank started by another launcher binding itself at init (COHORT_BIND),
// and cohort-bench --spawn.
#include <gtest/gtest.h>
#include <sched.h>

#include <map>
#include <set>
#include <sstream>

#include "common/cpu_binding.h"
#include "support/ports.h"
#include "support/subprocess.h"

namespace cohort {
namespace {

using testing::binary_path;
using testing::Subprocess;
using namespace std::chrono_literals;

struct ShellRun {
  int code = -1;
  std::string output;
};

// run_shell runs `cmd` under /bin/sh with stderr on stdout.
ShellRun run_shell(const std::string& cmd) {
  Subprocess p({"/bin/sh", "-c", "exec " + cmd + " 2>&1"});
  ShellRun r;
  r.output = p.read_all(100s);
  r.code = p.wait();
  return r;
}

std::string cohortrun() {
  return "'" + binary_path("tools/cohortrun") + "'";
}
std::string worker() {
  return "'" + binary_path("tests/launch_worker") + "'";
}

// The CPUs as launch_worker prints them: "0,1,2".
std::string comma_list(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

// affinity_line is what rank `rank` printed after "affinity=", or "".
std::string affinity_line(const std::string& output, int rank) {
  const std::string key = "[rank" + std::to_string(rank) + "]: affinity=";
  const size_t at = output.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return output.substr(from, output.find(' ', from) - from);
}

std::set<int> parse_commas(const std::string& text) {
  std::set<int> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) out.insert(std::stoi(part));
  return out;
}

TEST(BindingTest, CohortrunGivesEachWorkerItsOwnCoresByDefault) {
  const CpuTopology topology = CpuTopology::of_this_process();
  if (topology.core_count() < 2) GTEST_SKIP() << "needs two cores";
  ShellRun r = run_shell(cohortrun() + " --standalone --nproc-per-node 2 " + worker() + " affinity");
  ASSERT_EQ(r.code, 0) << r.output;
  std::set<int> seen;
  for (int lr = 0; lr < 2; ++lr) {
    const auto want = share_of_cpus(BindMode::kCores, topology, lr, 2, "test").value_or_throw();
    EXPECT_EQ(affinity_line(r.output, lr), comma_list(want.cpus)) << r.output;
    const std::set<int> got = parse_commas(affinity_line(r.output, lr));
    for (int c : got) EXPECT_TRUE(seen.insert(c).second) << "CPU " << c << " in two shares:\n" << r.output;
    EXPECT_FALSE(got.empty()) << r.output;
  }
  // The worker must not bind itself again on top.
  EXPECT_NE(r.output.find("[rank0]: affinity=" + affinity_line(r.output, 0) + " bind=none"),
            std::string::npos)
      << r.output;
}

// More workers than cores: neighbours share one, two to a core here
// (left unbound, the scheduler moves them about and jobs differ).
TEST(BindingTest, WorkersThatOutnumberTheCoresShareThemWithTheirNeighbours) {
  const CpuTopology topology = CpuTopology::of_this_process();
  const int cores = topology.core_count();
  if (cores > 4) GTEST_SKIP() << "starts two workers a core; this host has " << cores;
  const int workers = 2 * cores;
  ShellRun r = run_shell(cohortrun() + " --standalone --nproc-per-node " + std::to_string(workers) + " " +
                         worker() + " affinity");
  ASSERT_EQ(r.code, 0) << r.output;
  std::map<std::string, int> on_core;
  for (int lr = 0; lr < workers; ++lr) {
    const auto want = share_of_cpus(BindMode::kCores, topology, lr / 2, cores, "test").value_or_throw();
    EXPECT_EQ(affinity_line(r.output, lr), comma_list(want.cpus)) << lr << "\n" << r.output;
    ++on_core[affinity_line(r.output, lr)];
  }
  EXPECT_EQ(on_core.size(), static_cast<size_t>(cores)) << r.output;
  for (const auto& [cpus, n] : on_core) EXPECT_EQ(n, 2) << cpus << "\n" << r.output;
}

TEST(BindingTest, BindNoneLeavesWorkersWithTheLaunchersAffinity) {
  const std::string all = comma_list(affinity_of_this_thread());
  ShellRun r =
      run_shell(cohortrun() + " --standalone --nproc-per-node 2 --bind none " + worker() + " affinity");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(affinity_line(r.output, 0), all) << r.output;
  EXPECT_EQ(affinity_line(r.output, 1), all) << r.output;
}

TEST(BindingTest, CoresThatCannotFitAreRefusedNamingWhy) {
  const std::vector<int> mine = affinity_of_this_thread();
  const int first = mine.front();
  // Under taskset one CPU is all cohortrun may use: two ranks cannot each have a core.
  ShellRun r = run_shell("taskset -c " + std::to_string(first) + " " + cohortrun() +
                         " --standalone --nproc-per-node 2 --bind cores " + worker() + " affinity");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--bind cores"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 local ranks need 2 cores"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("only 1 core (CPUs " + std::to_string(first) + ")"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("affinity="), std::string::npos) << "no worker may start:\n" << r.output;
}

TEST(BindingTest, AutoWithinANarrowerAffinityStaysInsideIt) {
  const int first = affinity_of_this_thread().front();
  const std::string one = std::to_string(first);
  // auto cannot give two ranks a core each on one CPU: they share it, as
  // numa puts both on it, inside the launcher's own affinity.
  for (const char* bind : {"auto", "numa"}) {
    ShellRun r = run_shell("taskset -c " + one + " " + cohortrun() +
                           " --standalone --nproc-per-node 2 --bind " + bind + " " + worker() + " affinity");
    ASSERT_EQ(r.code, 0) << bind << "\n" << r.output;
    EXPECT_EQ(affinity_line(r.output, 0), one) << bind << "\n" << r.output;
    EXPECT_EQ(affinity_line(r.output, 1), one) << bind << "\n" << r.output;
  }
}

TEST(BindingTest, ABindingThatIsNotOneOfTheFourIsABadFlag) {
  ShellRun r = run_shell(cohortrun() + " --standalone --bind sockets " + worker() + " affinity");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--bind: 'sockets' is not a binding (auto, cores, numa or none)"),
            std::string::npos)
      << r.output;
}

// Two ranks started as another launcher (torchrun) would: env:// with
// LOCAL_RANK and LOCAL_WORLD_SIZE, nobody binding them.
ShellRun start_two_ranks(const std::string& prefix, const std::string& bind) {
  const int port = testing::free_port();
  std::string cmd;
  for (int r = 0; r < 2; ++r) {
    cmd += "env RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) +
           " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
           (bind.empty() ? "" : " COHORT_BIND=" + bind) + " " + prefix + " " + worker() +
           " pg_affinity | sed 's/^/[rank" + std::to_string(r) + "]: /' & ";
  }
  return run_shell("/bin/sh -c \"" + cmd + " wait\"");
}

TEST(BindingTest, ARankStartedByAnotherLauncherBindsItselfWhenItJoins) {
  const CpuTopology topology = CpuTopology::of_this_process();
  if (topology.core_count() < 2) GTEST_SKIP() << "needs two cores";
  if (affinity_of_this_thread() != host_cpus()) GTEST_SKIP() << "auto leaves a narrowed affinity alone";
  ShellRun r = start_two_ranks("", "");
  ASSERT_NE(r.output.find("[rank1]: affinity="), std::string::npos) << r.output;
  for (int lr = 0; lr < 2; ++lr) {
    const auto want = share_of_cpus(BindMode::kCores, topology, lr, 2, "test").value_or_throw();
    EXPECT_EQ(affinity_line(r.output, lr), comma_list(want.cpus)) << r.output;
  }
  // Every thread, also one started before init, and the sum still right.
  EXPECT_EQ(r.output.find("threads=differ"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank0]: affinity=" + affinity_line(r.output, 0) + " threads=agree sum=2"),
            std::string::npos)
      << r.output;
}

TEST(BindingTest, AutoLeavesARankWhoseAffinityWasAlreadySet) {
  const int first = affinity_of_this_thread().front();
  const std::string one = std::to_string(first);
  if (affinity_of_this_thread() != host_cpus()) GTEST_SKIP() << "this test runs under a narrowed affinity";
  ShellRun r = start_two_ranks("taskset -c " + one, "");
  EXPECT_EQ(affinity_line(r.output, 0), one) << r.output;
  EXPECT_EQ(affinity_line(r.output, 1), one) << r.output;
  // Told cores, two ranks on one CPU cannot fit: init fails and says why.
  r = start_two_ranks("taskset -c " + one, "cores");
  EXPECT_NE(r.output.find("cannot bind to cores: 2 local ranks need 2 cores"), std::string::npos) << r.output;
}

TEST(BindingTest, RanksThatShareOneCpuYieldFromTheStartAndRanksOnCoresOfTheirOwnDoNot) {
  const std::string one = std::to_string(affinity_of_this_thread().front());
  ShellRun r = start_two_ranks("env COHORT_LOG_LEVEL=info taskset -c " + one, "");
  EXPECT_NE(r.output.find("[rank1]: affinity="), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the 2 ranks of this host may run on CPUs " + one +
                          " only: waits on shared memory yield the CPU from the start"),
            std::string::npos)
      << r.output;
  if (CpuTopology::of_this_process().core_count() < 2) GTEST_SKIP() << "needs two cores";
  r = start_two_ranks("env COHORT_LOG_LEVEL=info", "cores");
  EXPECT_NE(r.output.find("[rank1]: affinity="), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("waits on shared memory yield"), std::string::npos) << r.output;
}

TEST(BindingTest, CohortBenchSpawnBindsItsRanksAndRefusesWhatCannotFit) {
  const std::string bench = "'" + binary_path("tools/cohort-bench") + "'";
  const int first = affinity_of_this_thread().front();
  ShellRun r = run_shell("taskset -c " + std::to_string(first) + " " + bench +
                         " barrier -n 2 -w 1 --spawn 2 --bind cores");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("cohort-bench: --bind cores: cannot bind to cores: 2 local ranks need 2 cores"),
            std::string::npos)
      << r.output;
  const CpuTopology topology = CpuTopology::of_this_process();
  if (topology.core_count() < 2) GTEST_SKIP() << "needs two cores";
  r = run_shell(bench + " barrier -n 2 -w 1 --spawn 2");
  ASSERT_EQ(r.code, 0) << r.output;
  std::string want = "# ranks bound to CPUs:";
  for (int lr = 0; lr < 2; ++lr)
    want += " " + cpu_list_text(share_of_cpus(BindMode::kCores, topology, lr, 2, "test").value().cpus);
  EXPECT_NE(r.output.find(want), std::string::npos) << r.output;
}

}  // namespace
}  // namespace cohort
