// How local ranks' shares of the CPUs are planned (on topologies written
// out here: two NUMA nodes with hyperthreads, which this machine lacks),
// CPU lists as Linux writes them, and binding every thread of a real
// process.
#include "common/cpu_binding.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include "cohort/errors.h"

namespace cohort {
namespace {

// Two nodes of two cores of two hyperthreads each, numbered as Linux
// numbers them on such hosts: CPU c and c+4 are one core's siblings.
CpuTopology two_nodes_with_hyperthreads() {
  CpuTopology t;
  for (int id = 0; id < 8; ++id) {
    const int core = id % 4;
    t.cpus.push_back({id, core, core / 2});
  }
  std::sort(t.cpus.begin(), t.cpus.end(), [](const auto& a, const auto& b) {
    return std::tie(a.node, a.core, a.id) < std::tie(b.node, b.core, b.id);
  });
  return t;
}

CpuTopology flat(int cpus) {
  CpuTopology t;
  for (int id = 0; id < cpus; ++id) t.cpus.push_back({id, id, 0});
  return t;
}

std::vector<int> share(BindMode mode, const CpuTopology& t, int lr, int l) {
  return share_of_cpus(mode, t, lr, l, "the test's CPUs").value_or_throw().cpus;
}

TEST(CpuListTest, WritesRangesAsLinuxDoes) {
  EXPECT_EQ(cpu_list_text({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(cpu_list_text({5}), "5");
  EXPECT_EQ(cpu_list_text({3, 1, 2, 2}), "1-3");
  EXPECT_EQ(cpu_list_text({}), "");
}

TEST(CpuListTest, ReadsWhatItWritesAndRefusesWhatIsNotAList) {
  EXPECT_EQ(parse_cpu_list("0-3,8").value(), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list("7").value(), (std::vector<int>{7}));
  EXPECT_TRUE(parse_cpu_list("").value().empty());
  for (const char* bad : {"a", "3-1", "-2", "1-x", "2x"}) {
    auto r = parse_cpu_list(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "' is not a CPU list"), std::string::npos);
  }
}

TEST(BindModeTest, ReadsTheFourModesAndNamesTheFlagOfAnyOther) {
  EXPECT_EQ(parse_bind_mode("cores", "--bind").value(), BindMode::kCores);
  EXPECT_EQ(parse_bind_mode("numa", "--bind").value(), BindMode::kNuma);
  EXPECT_EQ(parse_bind_mode("none", "--bind").value(), BindMode::kNone);
  EXPECT_EQ(parse_bind_mode("auto", "--bind").value(), BindMode::kAuto);
  auto bad = parse_bind_mode("socket", "COHORT_BIND");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "COHORT_BIND: 'socket' is not a binding (auto, cores, numa or none)");
}

TEST(CpuShareTest, CoresGivesContiguousWholeCoresWithTheirHyperthreads) {
  const CpuTopology t = two_nodes_with_hyperthreads();
  EXPECT_EQ(t.core_count(), 4);
  EXPECT_EQ(t.node_count(), 2);
  // Four ranks: a core each, both of its hyperthreads.
  EXPECT_EQ(share(BindMode::kCores, t, 0, 4), (std::vector<int>{0, 4}));
  EXPECT_EQ(share(BindMode::kCores, t, 1, 4), (std::vector<int>{1, 5}));
  EXPECT_EQ(share(BindMode::kCores, t, 3, 4), (std::vector<int>{3, 7}));
  // Two ranks: two cores each, which are exactly one NUMA node each.
  EXPECT_EQ(share(BindMode::kCores, t, 0, 2), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(share(BindMode::kCores, t, 1, 2), (std::vector<int>{2, 3, 6, 7}));
}

TEST(CpuShareTest, SharesOfAnUnevenSplitAreDisjointAndCoverEveryCore) {
  const CpuTopology t = flat(10);
  std::vector<int> seen;
  for (int lr = 0; lr < 3; ++lr) {
    const auto s = share(BindMode::kCores, t, lr, 3);
    EXPECT_GE(s.size(), 3u);
    EXPECT_LE(s.size(), 4u);
    for (size_t i = 1; i < s.size(); ++i) EXPECT_EQ(s[i], s[i - 1] + 1) << "contiguous";
    seen.insert(seen.end(), s.begin(), s.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, t.ids());
}

TEST(CpuShareTest, NumaGivesWholeNodesAndRanksShareANodeWhenTheyOutnumberThem) {
  const CpuTopology t = two_nodes_with_hyperthreads();
  EXPECT_EQ(share(BindMode::kNuma, t, 0, 2), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(share(BindMode::kNuma, t, 1, 2), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(share(BindMode::kNuma, t, 0, 1), t.ids());
  // Six ranks on two nodes: three to a node, each with the node's CPUs.
  for (int lr = 0; lr < 6; ++lr) {
    EXPECT_EQ(share(BindMode::kNuma, t, lr, 6),
              lr < 3 ? (std::vector<int>{0, 1, 4, 5}) : (std::vector<int>{2, 3, 6, 7}))
        << lr;
  }
}

TEST(CpuShareTest, CoresThatCannotFitAreRefusedWithBothCountsAndTheCpus) {
  auto r = share_of_cpus(BindMode::kCores, flat(2), 0, 3, "cohortrun's affinity");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "cannot bind to cores: 3 local ranks need 3 cores to bind one or more each, but cohortrun's "
            "affinity has only 2 cores (CPUs 0-1); use fewer ranks per host, bind numa, or bind none");
  // Hyperthreads are not cores: four CPUs of two cores fit two ranks, not three.
  CpuTopology ht;
  for (int id = 0; id < 4; ++id) ht.cpus.push_back({id, id / 2, 0});
  EXPECT_TRUE(share_of_cpus(BindMode::kCores, ht, 1, 2, "x").ok());
  EXPECT_FALSE(share_of_cpus(BindMode::kCores, ht, 1, 3, "x").ok());
}

TEST(CpuShareTest, AutoGivesEachRankCoresOfItsOwnOrElseNeighboursShareACore) {
  EXPECT_EQ(share(BindMode::kAuto, flat(4), 1, 2), (std::vector<int>{2, 3}));
  // 4 ranks on 2 cores: 0 and 1 on the first, 2 and 3 on the second.
  for (int lr = 0; lr < 4; ++lr) {
    EXPECT_EQ(share(BindMode::kAuto, flat(2), lr, 4), (std::vector<int>{lr / 2})) << lr;
  }
  // 3 on 2: rank i on core i*2/3, so 0 and 1 share; a core's hyperthreads stay together.
  CpuTopology ht;
  for (int id = 0; id < 4; ++id) ht.cpus.push_back({id, id / 2, 0});
  EXPECT_EQ(share(BindMode::kAuto, ht, 0, 3), (std::vector<int>{0, 1}));
  EXPECT_EQ(share(BindMode::kAuto, ht, 1, 3), (std::vector<int>{0, 1}));
  EXPECT_EQ(share(BindMode::kAuto, ht, 2, 3), (std::vector<int>{2, 3}));
  // Every core gets a rank: 5 ranks on 4 NUMA-ordered cores.
  std::set<std::vector<int>> used;
  for (int lr = 0; lr < 5; ++lr) used.insert(share(BindMode::kAuto, two_nodes_with_hyperthreads(), lr, 5));
  EXPECT_EQ(used.size(), 4u);
  auto none = share_of_cpus(BindMode::kNone, flat(4), 0, 2, "x").value();
  EXPECT_TRUE(none.cpus.empty());
  EXPECT_FALSE(share_of_cpus(BindMode::kCores, flat(4), 2, 2, "x").ok()) << "local rank out of range";
}

TEST(CpuTopologyTest, ThisProcessHasTheCpusOfItsAffinity) {
  const CpuTopology t = CpuTopology::of_this_process();
  EXPECT_EQ(t.ids(), affinity_of_this_thread());
  EXPECT_GE(t.core_count(), 1);
  EXPECT_LE(t.core_count(), static_cast<int>(t.cpus.size()));
  EXPECT_FALSE(host_cpus().empty());
}

// In a child process, so that this test process keeps its own affinity.
TEST(BindThisProcessTest, ReachesEveryThreadAlsoOnesStartedBefore) {
  const std::vector<int> all = affinity_of_this_thread();
  const int target = all.back();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<bool> bound{false};
    std::atomic<int> seen_by_thread{-2};
    std::thread early([&] {
      while (!bound.load()) std::this_thread::yield();
      const auto mine = affinity_of_this_thread();
      seen_by_thread = mine.size() == 1 ? mine[0] : -1;
    });
    Status st = bind_this_process({target});
    bound = true;
    early.join();
    std::thread late([&] {
      const auto mine = affinity_of_this_thread();
      if (mine.size() != 1 || mine[0] != target) seen_by_thread = -3;
    });
    late.join();
    _exit(st.ok() && seen_by_thread == target ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a thread of the bound process runs elsewhere";
}

}  // namespace
}  // namespace cohort
