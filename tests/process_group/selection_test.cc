// The algorithm table, its COHORT_ALGO override, and the choice of address.
#include <gtest/gtest.h>

#include "algorithms/selection.h"
#include "cohort/config.h"
#include "process_group/thread_ranks.h"
#include "transport/tcp/connect.h"

namespace cohort::testing {
namespace {

TEST(AlgorithmSelection, TablePicksLatencyOrBandwidthAlgorithms) {
  reset_config("COHORT_ALGO");
  EXPECT_EQ(choose_algorithm(Collective::kAllReduce, 4, 8).value(), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(choose_algorithm(Collective::kAllReduce, 256 << 10, 8).value(), Algorithm::kHalvingDoubling);
  EXPECT_EQ(choose_algorithm(Collective::kAllReduce, 64 << 20, 8).value(), Algorithm::kRing);
  // Broadcast: a tree while latency counts, a chain (each link carries the
  // data once) once bandwidth does.
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 16 << 10, 5).value(), Algorithm::kBinomialTree);
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 1 << 20, 5).value(), Algorithm::kChain);
  // Across hosts with shared memory within them, each byte over a link once.
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter}) {
    EXPECT_EQ(choose_algorithm(c, 4, 4, Topology::kHosts).value(), Algorithm::kHierarchical)
        << collective_name(c);
    EXPECT_EQ(choose_algorithm(c, 64 << 20, 4, Topology::kHosts).value(), Algorithm::kHierarchical)
        << collective_name(c);
  }
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 1 << 20, 4, Topology::kHosts).value(),
            Algorithm::kChain);
  EXPECT_EQ(choose_algorithm(Collective::kBarrier, 0, 3).value(), Algorithm::kDissemination);
}

TEST(AlgorithmSelection, OverrideForcesAnAlgorithmAndRejectsNonsense) {
  set_config("COHORT_ALGO", "broadcast=binomial_tree,all_reduce=ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllReduce, 4, 8).value(), Algorithm::kRing);
  set_config("COHORT_ALGO", "all_reduce=binomial_tree");
  auto bad = choose_algorithm(Collective::kAllReduce, 4, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("binomial_tree cannot run all_reduce"), std::string::npos);
  set_config("COHORT_ALGO", "all_reduce=fastest");
  EXPECT_NE(
      choose_algorithm(Collective::kAllReduce, 4, 8).status().message().find("unknown algorithm 'fastest'"),
      std::string::npos);
  reset_config("COHORT_ALGO");
}

TEST(AlgorithmSelection, EveryAllReduceAlgorithmGivesTheSameSums) {
  for (const char* algo :
       {"all_reduce=ring", "all_reduce=recursive_doubling", "all_reduce=halving_doubling"}) {
    set_config("COHORT_ALGO", algo);
    for (int world : {2, 3, 5, 6, 8}) {
      run_ranks(world, [&](ProcessGroup& g) {
        for (size_t n : {size_t{1}, size_t{6}, size_t{100003}}) {
          std::vector<int64_t> v(n, g.rank() + 1);
          g.all_reduce(Buffer::of(v));
          for (int64_t x : v) ASSERT_EQ(x, world * (world + 1) / 2) << algo << " n " << n;
        }
      });
    }
  }
  reset_config("COHORT_ALGO");
}

// Off by default (slower here than the slots), single-copy all_gather
// still gives what the slots give: from 4 KiB per rank, below 32 KiB,
// each rank reads the others' buffers (when the system allows it and the
// ranks have a core each; else the slots run, and must agree as well).
TEST(OneHostPaths, AllGatherReadingThePeersBuffersGivesWhatTheSlotsGive) {
  set_config("COHORT_SHM_SINGLE_COPY_BYTES", "4096");
  run_ranks(2, [](ProcessGroup& g) {
    for (size_t n : {size_t{1025}, size_t{5000}, size_t{8191}, size_t{8192}}) {
      std::vector<int32_t> in(n), out(2 * n, -1);
      for (size_t k = 0; k < n; ++k) in[k] = g.rank() * 1000000 + static_cast<int32_t>(k);
      g.all_gather_into_tensor(Buffer::of(out), Buffer::of(in));
      for (size_t k = 0; k < 2 * n; ++k) {
        ASSERT_EQ(out[k], static_cast<int32_t>(k / n) * 1000000 + static_cast<int32_t>(k % n)) << "n " << n;
      }
    }
  });
  reset_config("COHORT_SHM_SINGLE_COPY_BYTES");
}

TEST(AddressChoice, InterfaceByNameOrRouteToTheMaster) {
  set_config("COHORT_SOCKET_IFNAME", "lo");
  EXPECT_EQ(tcp::local_address("10.1.2.3").value(), "127.0.0.1");
  set_config("COHORT_SOCKET_IFNAME", "no-such-if0");
  auto bad = tcp::local_address("");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no-such-if0"), std::string::npos);
  reset_config("COHORT_SOCKET_IFNAME");
  EXPECT_EQ(tcp::local_address("127.0.0.1").value(), "127.0.0.1");
  EXPECT_EQ(tcp::local_address("").value(), "127.0.0.1") << "no master host (HashStore, FileStore): one host";
}

}  // namespace
}  // namespace cohort::testing
