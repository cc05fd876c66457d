// The algorithm table, its COHORT_ALGO override, and the choice of address.
#include <gtest/gtest.h>

#include <cmath>

#include "algorithms/selection.h"
#include "cohort/config.h"
#include "cohort/errors.h"
#include "process_group/collective_checks.h"
#include "process_group/thread_ranks.h"
#include "support/messages.h"
#include "transport/tcp/connect.h"

namespace cohort::testing {
namespace {

TEST(AlgorithmSelection, CostModelPicksLatencyOrBandwidthAlgorithms) {
  reset_config("COHORT_ALGO");
  EXPECT_EQ(choose_algorithm(Collective::kAllReduce, 4, 8).value(), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(choose_algorithm(Collective::kAllReduce, 256 << 10, 8).value(), Algorithm::kHalvingDoubling);
  EXPECT_EQ(choose_algorithm(Collective::kAllReduce, 64 << 20, 8).value(), Algorithm::kRing);
  // Broadcast: a tree while latency counts, a chain (each link carries the
  // data once) once bandwidth does.
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 8 << 10, 5).value(), Algorithm::kBinomialTree);
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 1 << 20, 5).value(), Algorithm::kChain);
  // Across hosts with shared memory within them, each byte over a link once.
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter}) {
    EXPECT_EQ(choose_algorithm(c, 4, 4, Topology::kHosts).value(), Algorithm::kHierarchical)
        << collective_name(c);
    // A large all_reduce in shares: every local rank carries its own.
    EXPECT_EQ(choose_algorithm(c, 64 << 20, 4, Topology::kHosts).value(),
              c == Collective::kAllReduce ? Algorithm::kHierarchicalShares : Algorithm::kHierarchical)
        << collective_name(c);
  }
  EXPECT_EQ(choose_algorithm(Collective::kBarrier, 0, 3).value(), Algorithm::kDissemination);
  // One host: straight through shared memory.
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 1 << 20, 4, Topology::kOneHost).value(),
            Algorithm::kShmDirect);
  EXPECT_EQ(choose_algorithm(Collective::kGather, 100, 4, Topology::kOneHost).value(), Algorithm::kDirect);
  // At every size: a 64 MiB all_reduce through the rings is slower, whatever
  // the model's rates say (a stopped rank's test caught the ring there).
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                       Collective::kBroadcast, Collective::kAllToAll, Collective::kBarrier}) {
    for (int p : {2, 4, 8, 64}) {
      EXPECT_EQ(choose_algorithm(c, size_t{64} << 20, p, Topology::kOneHost).value(), Algorithm::kShmDirect)
          << collective_name(c) << " P " << p;
    }
  }
}

// The hierarchical all_reduce's two ways are two entries of the table:
// through one leader a host while latency counts, in shares once the
// host's copies (which the shares' pipeline hides behind the link) do. The
// model puts the switch where a hard-coded 1 MiB used to be, give or take
// a few doublings, and never offers the shares to hosts of unequal size.
TEST(AlgorithmSelection, LargeAllReducesAcrossEqualHostsGoInShares) {
  reset_config("COHORT_ALGO");
  const CostModel m = CostModel::from_config();
  for (auto [ranks, hosts] : {std::pair{4, 2}, {8, 4}, {64, 8}, {512, 64}}) {
    const GroupShape shape = GroupShape::of(ranks, hosts);
    const AlgorithmTable table = AlgorithmTable::build(shape, m, "");
    EXPECT_EQ(table.choose(Collective::kAllReduce, 4).value(), Algorithm::kHierarchical) << shape.describe();
    EXPECT_EQ(table.choose(Collective::kAllReduce, 64 << 20).value(), Algorithm::kHierarchicalShares)
        << shape.describe();
    size_t from = 4;
    while (from < (size_t{1} << 30) &&
           table.choose(Collective::kAllReduce, from).value() == Algorithm::kHierarchical)
      from *= 2;
    EXPECT_GE(from, size_t{64} << 10) << shape.describe();
    EXPECT_LE(from, size_t{16} << 20) << shape.describe();
  }
  const GroupShape uneven{7, 4, 2, Topology::kHosts};
  EXPECT_FALSE(uneven.hosts_hold_equal_ranks());
  EXPECT_EQ(AlgorithmTable::build(uneven, m, "").choose(Collective::kAllReduce, 64 << 20).value(),
            Algorithm::kHierarchical);
  const std::string why = why_cannot_run(Algorithm::kHierarchicalShares, Collective::kAllReduce, uneven);
  EXPECT_NE(why.find("same number of ranks"), std::string::npos) << why;
  const Result<Algorithm> forced =
      AlgorithmTable::build(uneven, m, "all_reduce=hierarchical_shares").choose(Collective::kAllReduce, 4);
  ASSERT_FALSE(forced.ok());
  EXPECT_NE(forced.status().message().find("all_reduce=hierarchical_shares"), std::string::npos)
      << forced.status().message();
  EXPECT_NE(forced.status().message().find("same number of ranks"), std::string::npos)
      << forced.status().message();
}

// The table counts ranks: at 2 the ring's one step is as few as any; at 32
// its 31 dependent steps lose to log2 P below the sizes where bandwidth
// rules (issue 48: 2.4-4.9x behind Open MPI at 16-32 ranks).
TEST(AlgorithmSelection, ManyRanksTakeLogStepAlgorithmsUntilBandwidthRules) {
  reset_config("COHORT_ALGO");
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 16 << 10, 2).value(), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 16 << 10, 32).value(), Algorithm::kBruck);
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 128, 17).value(), Algorithm::kBruck);
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 4 << 20, 32).value(), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 16 << 10, 2).value(), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 16 << 10, 32).value(), Algorithm::kRecursiveHalving);
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 4 << 20, 32).value(), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 256 << 10, 16).value(), Algorithm::kScatterAllGather);
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 4, 16).value(), Algorithm::kKnomialTree);
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 4, 2).value(), Algorithm::kBinomialTree);
}

TEST(AlgorithmSelection, ATableIsDecidedOncePerSizeClassAndSaysWhatItChose) {
  reset_config("COHORT_ALGO");
  const AlgorithmTable t = AlgorithmTable::for_config(GroupShape::flat(32));
  // Every size of a run of classes chooses alike; the limit ends the run.
  const size_t limit = t.class_limit(Collective::kAllGather, 100);
  ASSERT_LT(limit, SIZE_MAX);
  EXPECT_EQ(t.choose(Collective::kAllGather, limit).value(), t.choose(Collective::kAllGather, 100).value());
  EXPECT_NE(t.choose(Collective::kAllGather, limit + 1).value(),
            t.choose(Collective::kAllGather, 100).value());
  const std::string text = t.describe();
  EXPECT_NE(text.find("32 ranks, none sharing memory"), std::string::npos) << text;
  EXPECT_NE(text.find("all_gather  0-"), std::string::npos) << text;
  EXPECT_NE(text.find("  bruck  ("), std::string::npos) << text;
}

// On one host the table takes shm_direct by rule (measured faster than the
// model tells at large sizes): its line says so where the runner-up's
// prediction is lower, and a barrier, which moves no bytes, is priced by
// its steps, not at a gigabyte.
TEST(AlgorithmSelection, TheOneHostTableSaysWhatItTakesByRuleAndPricesABarrierByItsSteps) {
  reset_config("COHORT_ALGO");
  const std::string text = AlgorithmTable::for_config(GroupShape::of(4, 1)).describe();
  const size_t all_reduce = text.find("all_reduce  0-  shm_direct  (");
  ASSERT_NE(all_reduce, std::string::npos) << text;
  const std::string line = text.substr(all_reduce, text.find('\n', all_reduce) - all_reduce);
  EXPECT_NE(line.find("taken here whatever the model says"), std::string::npos) << line;
  const size_t barrier = text.find("barrier  0-  shm_direct  (");
  ASSERT_NE(barrier, std::string::npos) << text;
  EXPECT_NE(text.find(" us;", barrier), std::string::npos) << "priced in microseconds, not at 1 GiB: " << text;
  EXPECT_EQ(text.find(" ms;", barrier), std::string::npos) << text;
}

TEST(AlgorithmSelection, OverridesTakeSizeRangesAndRefuseWhatCannotRun) {
  set_config("COHORT_ALGO", "broadcast=binomial_tree,all_reduce=ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllReduce, 4, 8).value(), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 64 << 20, 8).value(), Algorithm::kBinomialTree);
  set_config("COHORT_ALGO", "all_gather:0-64K:bruck,all_gather:64K-:ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 0, 2).value(), Algorithm::kBruck);
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, (64 << 10) - 1, 2).value(), Algorithm::kBruck);
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 64 << 10, 32).value(), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 1 << 30, 32).value(), Algorithm::kRing);
  // Outside every range the table decides.
  set_config("COHORT_ALGO", "all_gather:1K-2K:ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 4, 32).value(), Algorithm::kBruck);
  EXPECT_EQ(choose_algorithm(Collective::kAllGather, 1500, 32).value(), Algorithm::kRing);

  auto refused = [](const char* spec, Collective c, Topology t, const char* why) {
    set_config("COHORT_ALGO", spec);
    auto bad = choose_algorithm(c, 4, 8, t);
    ASSERT_FALSE(bad.ok()) << spec;
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status().message();
  };
  refused("all_reduce=binomial_tree", Collective::kAllReduce, Topology::kNetwork,
          "binomial_tree cannot run all_reduce");
  refused("all_reduce=fastest", Collective::kAllReduce, Topology::kNetwork, "unknown algorithm 'fastest'");
  // Formerly dropped silently: an algorithm for another kind of group.
  refused("all_reduce=shm_direct", Collective::kAllReduce, Topology::kNetwork,
          "item 'all_reduce=shm_direct' cannot run on this group (8 ranks, none sharing memory): shm_direct "
          "needs every rank on one host");
  refused("all_gather=hierarchical", Collective::kAllGather, Topology::kOneHost,
          "hierarchical needs several hosts");
  refused("all_gather:64K-1K:ring", Collective::kAllGather, Topology::kNetwork, "is not a range");
  refused("all_gather:x-:ring", Collective::kAllGather, Topology::kNetwork, "is not a range");
  refused("allgather=ring", Collective::kAllReduce, Topology::kNetwork, "unknown collective 'allgather'");
  refused("all_gather", Collective::kBarrier, Topology::kNetwork, "is not collective=algorithm");
  // A refusal is the named collective's alone.
  set_config("COHORT_ALGO", "all_reduce=shm_direct");
  EXPECT_EQ(choose_algorithm(Collective::kBarrier, 0, 8).value(), Algorithm::kDissemination);
  reset_config("COHORT_ALGO");
}

// shm_direct's ways (shm_ways.h): forced by COHORT_ALGO as
// shm_direct.WAY over a range of sizes, refused where no such way runs the
// collective, and listed under a one-host table only.
TEST(AlgorithmSelection, ShmDirectsWaysAreForcedByNameAndRefusedWhereTheyDoNotRun) {
  set_config("COHORT_ALGO", "broadcast:64K-:shm_direct.slots");
  const AlgorithmTable one_host = AlgorithmTable::for_config(GroupShape::of(4, 1));
  EXPECT_EQ(one_host.choose(Collective::kBroadcast, 1 << 20).value(), Algorithm::kShmDirect);
  EXPECT_EQ(one_host.forced_way(Collective::kBroadcast, 1 << 20), ShmWay::kSlots);
  EXPECT_EQ(one_host.forced_way(Collective::kBroadcast, 1024), ShmWay::kByRule);
  EXPECT_EQ(one_host.forced_way(Collective::kAllGather, 1 << 20), ShmWay::kByRule);
  const std::string text = one_host.describe();
  EXPECT_NE(text.find("broadcast  64K-  shm_direct.slots  (forced by COHORT_ALGO)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# shm_direct's ways within the host"), std::string::npos) << text;
  EXPECT_NE(text.find("broadcast  in_place*  from the host's single-copy size"), std::string::npos) << text;
  EXPECT_NE(text.find("all_to_all  posts  "), std::string::npos) << "listed, not forceable: " << text;
  reset_config("COHORT_ALGO");
  const std::string flat = AlgorithmTable::for_config(GroupShape::flat(4)).describe();
  EXPECT_EQ(flat.find("shm_direct's ways"), std::string::npos) << flat;

  auto refused = [](const char* spec, Collective c, const char* why) {
    set_config("COHORT_ALGO", spec);
    auto bad = choose_algorithm(c, 4, 4, Topology::kOneHost);
    ASSERT_FALSE(bad.ok()) << spec;
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status().message();
  };
  refused("broadcast=shm_direct.stamp", Collective::kBroadcast,
          "COHORT_ALGO item 'broadcast=shm_direct.stamp': shm_direct has no way 'stamp' to force for "
          "broadcast (its ways: posts, in_place, slots)");
  refused("reduce=shm_direct.sideways", Collective::kReduce,
          "shm_direct has no way 'sideways' (reduce's: posts, slots)");
  refused("all_to_all=shm_direct.posts", Collective::kAllToAll,
          "(its ways are agreed by the host's ranks at each call)");
  refused("all_gather=ring.slots", Collective::kAllGather,
          "only shm_direct has ways to force (shm_direct.WAY)");
  reset_config("COHORT_ALGO");
}

// The rules take the ways their entries say, at the edges the entries name.
TEST(AlgorithmSelection, ShmDirectsRulesTakeTheWaysTheirEntriesName) {
  auto way = [](Collective c, size_t bytes, bool oversubscribed = false) {
    return shm_way_by_rule(c, ShmCallFacts{bytes, true, 32 << 10, oversubscribed});
  };
  EXPECT_EQ(way(Collective::kAllReduce, 8), ShmWay::kStamp);
  EXPECT_EQ(way(Collective::kAllReduce, 9), ShmWay::kPosts);
  EXPECT_EQ(way(Collective::kAllReduce, 16384), ShmWay::kPosts);
  EXPECT_EQ(way(Collective::kAllReduce, 16385), ShmWay::kSlots);
  EXPECT_EQ(way(Collective::kBroadcast, 16384), ShmWay::kPosts);
  EXPECT_EQ(way(Collective::kBroadcast, 16385), ShmWay::kSlots);  // below the single-copy size
  EXPECT_EQ(way(Collective::kBroadcast, 32 << 10), ShmWay::kInPlace);
  EXPECT_EQ(way(Collective::kBroadcast, 32 << 10, true), ShmWay::kSlots);
  EXPECT_EQ(way(Collective::kBroadcast, 2 << 20), ShmWay::kSlots);
  EXPECT_EQ(way(Collective::kAllGather, 2 << 20), ShmWay::kInPlace);
  // An all_gather's blocks that fit a post are read in place from 8 KiB,
  // unless COHORT_SHM_SINGLE_COPY_BYTES set the size or the ranks
  // outnumber their CPUs.
  EXPECT_EQ(way(Collective::kAllGather, 8191), ShmWay::kPosts);
  EXPECT_EQ(way(Collective::kAllGather, 8192), ShmWay::kInPlace);
  EXPECT_EQ(way(Collective::kAllGather, 8192, true), ShmWay::kPosts);
  EXPECT_EQ(shm_way_by_rule(Collective::kAllGather, ShmCallFacts{8192, true, 32 << 10, false, true}),
            ShmWay::kPosts);
  EXPECT_EQ(shm_way_by_rule(Collective::kAllGather, ShmCallFacts{8192, false, SIZE_MAX, false}),
            ShmWay::kPosts);
  EXPECT_EQ(way(Collective::kReduceScatter, 1024, true), ShmWay::kPosts);
  EXPECT_EQ(way(Collective::kReduceScatter, 1025, true), ShmWay::kSlots);
  EXPECT_EQ(way(Collective::kReduceScatter, 16384), ShmWay::kPosts);
  EXPECT_EQ(shm_way_by_rule(Collective::kBroadcast, ShmCallFacts{1 << 20, false, SIZE_MAX, false}),
            ShmWay::kSlots);
  // Forced, the posts and the stamp take what they hold; reading in place
  // needs a host whose ranks may.
  const ShmCallFacts all_blocks_in_a_post{16384, true, 0, true};
  EXPECT_EQ(why_way_cannot_run(Collective::kReduceScatter, ShmWay::kPosts, all_blocks_in_a_post), "");
  EXPECT_NE(why_way_cannot_run(Collective::kAllReduce, ShmWay::kStamp, ShmCallFacts{9, true, 0, false})
                .find("the stamp carries a word (8 bytes); this call has 9"),
            std::string::npos);
  const ShmCallFacts no_single_copy{4, false, SIZE_MAX, false};
  EXPECT_NE(why_way_cannot_run(Collective::kBroadcast, ShmWay::kInPlace, no_single_copy), "");
}

// A group that a refused override broke refuses later work as a
// BackendError naming the first failure: not a network error, since no
// peer is gone.
TEST(AlgorithmSelection, AGroupBrokenByARefusedOverrideIsNotANetworkError) {
  set_config("COHORT_SHM", "off");
  set_config("COHORT_ALGO", "all_reduce=shm_direct");
  run_ranks(2, [](ProcessGroup& g) {
    std::vector<float> f(4, 1.0f);
    EXPECT_THROW(g.all_reduce(Buffer::of(f)), InvalidArgument);
    try {
      g.barrier();
      ADD_FAILURE() << "a broken group ran a barrier";
    } catch (const BackendError& e) {
      EXPECT_NE(std::string(e.what()).find("can no longer be used because all_reduce"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("shm_direct needs every rank on one host"), std::string::npos)
          << e.what();
    }
  });
  reset_config("COHORT_ALGO");
  reset_config("COHORT_SHM");
}

TEST(AlgorithmSelection, LeadersOverridesApplyBetweenHostsOnly) {
  set_config("COHORT_ALGO", "leaders.all_reduce=ring,all_gather=ring");
  const AlgorithmTable group = AlgorithmTable::for_config(GroupShape::of(8, 4));
  const AlgorithmTable leaders = AlgorithmTable::for_config(GroupShape::flat(4), true);
  EXPECT_EQ(group.choose(Collective::kAllReduce, 4).value(), Algorithm::kHierarchical);
  EXPECT_EQ(group.choose(Collective::kAllGather, 4).value(), Algorithm::kRing);
  EXPECT_EQ(leaders.choose(Collective::kAllReduce, 4).value(), Algorithm::kRing);
  EXPECT_EQ(leaders.choose(Collective::kAllGather, 4).value(), Algorithm::kBruck);
  reset_config("COHORT_ALGO");
}

// The step between hosts of all_gather and reduce_scatter runs in every
// column at once (a host's ranks share its link): a ring of the hosts
// only where its H-1 steps are not the cost; at 64 hosts x 8 ranks and
// small blocks, log2 H steps (issue 48: "64 hosts x 8 ranks is not a ring
// of 64").
TEST(AlgorithmSelection, TheColumnsStepBetweenManyHostsTakesLogSteps) {
  reset_config("COHORT_ALGO");
  const CostModel m = CostModel::from_config();
  const AlgorithmTable columns = AlgorithmTable::for_config(GroupShape::between_hosts(64, 8), true);
  EXPECT_EQ(columns.choose(Collective::kAllGather, 4 << 10).value(), Algorithm::kBruck);
  EXPECT_EQ(columns.choose(Collective::kReduceScatter, 4 << 10).value(), Algorithm::kRecursiveHalving);
  EXPECT_EQ(columns.choose(Collective::kAllGather, 64 << 20).value(), Algorithm::kRing);
  EXPECT_EQ(columns.choose(Collective::kReduceScatter, 64 << 20).value(), Algorithm::kRing);
  // Two hosts: one step either way, and the ring copies less.
  const AlgorithmTable two = AlgorithmTable::for_config(GroupShape::between_hosts(2, 8), true);
  EXPECT_EQ(two.choose(Collective::kAllGather, 4).value(), Algorithm::kRing);
  // The hierarchical entry prices what runs: under 63 latencies for a small
  // all_gather at 64 x 8, and its link's share counted (8 columns a link).
  const GroupShape big = GroupShape::of(512, 64);
  const double small = registry_entry(Algorithm::kHierarchical).cost(Collective::kAllGather, big, m, 1024);
  EXPECT_LT(small, 63 * m.network.latency_s);
  EXPECT_GT(small, 6 * m.network.latency_s);
  const double large =
      registry_entry(Algorithm::kHierarchical).cost(Collective::kAllGather, big, m, double(1 << 20));
  EXPECT_GT(large, 63.0 * 8 * (1 << 20) / m.network.bytes_per_s);
  // A leaders. override reaches the columns too, and one that cannot run
  // there is refused by name.
  set_config("COHORT_ALGO", "leaders.all_gather=ring,leaders.reduce_scatter=bruck");
  const AlgorithmTable forced = AlgorithmTable::for_config(GroupShape::between_hosts(64, 8), true);
  EXPECT_EQ(forced.choose(Collective::kAllGather, 4).value(), Algorithm::kRing);
  auto refused = forced.choose(Collective::kReduceScatter, 4);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("bruck cannot run reduce_scatter"), std::string::npos)
      << refused.status().message();
  reset_config("COHORT_ALGO");
}

// At many ranks a medium broadcast goes down the binary tree in segments:
// the binomial tree's hops each carry the whole buffer (issue 48's
// "segmented trees"); small ones stay on the binomial tree.
TEST(AlgorithmSelection, MediumBroadcastsAtManyRanksGoDownAPipelinedTree) {
  reset_config("COHORT_ALGO");
  const AlgorithmTable table = AlgorithmTable::for_config(GroupShape::flat(1024));
  EXPECT_EQ(table.choose(Collective::kBroadcast, 64 << 10).value(), Algorithm::kPipelinedTree);
  EXPECT_EQ(table.choose(Collective::kBroadcast, 8 << 10).value(), Algorithm::kBinomialTree);
  const CostModel m = CostModel::from_config();
  const GroupShape big = GroupShape::flat(1024);
  EXPECT_LT(registry_entry(Algorithm::kPipelinedTree).cost(Collective::kBroadcast, big, m, 64 << 10),
            registry_entry(Algorithm::kBinomialTree).cost(Collective::kBroadcast, big, m, 64 << 10));
}

// Up the same tree, a reduce of 32 KiB at 1K ranks: the segments' latencies
// overlap, so the tree pays its depth's latency once and then a segment's
// transfer each, and it beats the reduce_scatter-then-gather that the
// model chose while it charged every segment a latency (the simulator:
// the tree 3.3-3.9x its bound at 16-64 KiB, halving_gather 4.7-5.4x).
TEST(AlgorithmSelection, MediumReducesAtManyRanksGoUpAPipelinedTree) {
  reset_config("COHORT_ALGO");
  const AlgorithmTable table = AlgorithmTable::for_config(GroupShape::flat(1024));
  EXPECT_EQ(table.choose(Collective::kReduce, 32 << 10).value(), Algorithm::kPipelinedTree);
  EXPECT_EQ(table.choose(Collective::kReduce, 1 << 20).value(), Algorithm::kHalvingGather);
  // At 8 ranks the depth is too short to hide anything: the binomial tree.
  const AlgorithmTable few = AlgorithmTable::for_config(GroupShape::flat(8));
  EXPECT_EQ(few.choose(Collective::kReduce, 16 << 10).value(), Algorithm::kBinomialTree);
  EXPECT_EQ(few.choose(Collective::kBroadcast, 32 << 10).value(), Algorithm::kBinomialTree);
}

// A size class is chosen for every size in it, not for its top alone. At
// 1K ranks the model has halving_gather a hair ahead of the tree at 128 KiB
// and well behind at 64 KiB, so a reduce of 64 KiB-128 KiB goes up the tree
// (the simulator agrees: 391 against 538 us at 64 KiB, 604 against 636 at
// 128 KiB). And in every class of every collective at several shapes, the
// choice is never further behind the cheapest, anywhere in the class, than
// the class's top's own cheapest would be.
TEST(AlgorithmSelection, ASizeClassIsPricedAcrossItNotAtItsTop) {
  reset_config("COHORT_ALGO");
  const CostModel m = CostModel::from_config();
  const GroupShape big = GroupShape::flat(1024);
  const AlgorithmTable table = AlgorithmTable::for_config(big);
  const double top = (128 << 10) - 1;
  const double tree = registry_entry(Algorithm::kPipelinedTree).cost(Collective::kReduce, big, m, 64 << 10);
  const double halving =
      registry_entry(Algorithm::kHalvingGather).cost(Collective::kReduce, big, m, 64 << 10);
  ASSERT_LT(tree, 0.9 * halving);  // the premise: the tree well ahead at 64 KiB
  ASSERT_EQ(cheapest(Collective::kReduce, big, m, top), Algorithm::kHalvingGather);  // and not at the top
  EXPECT_EQ(table.choose(Collective::kReduce, 64 << 10).value(), Algorithm::kPipelinedTree);

  auto worst_ratio = [&](Algorithm a, Collective c, const GroupShape& shape, double from, double to) {
    double worst = 0;
    for (int i = 0; i <= 8; ++i) {
      const double bytes = from * std::pow(to / from, i / 8.0);
      double best = 0;
      cheapest(c, shape, m, bytes, &best);
      worst = std::max(worst, registry_entry(a).cost(c, shape, m, bytes) / best);
    }
    return worst;
  };
  for (const GroupShape& shape :
       {GroupShape::flat(16), GroupShape::flat(1024), GroupShape::between_hosts(64, 8)}) {
    const AlgorithmTable t = AlgorithmTable::build(shape, m, "");
    for (int c = 0; c < kCollectives; ++c) {
      const Collective collective = static_cast<Collective>(c);
      if (collective == Collective::kBarrier) continue;
      for (int k = 4; k <= 26; ++k) {
        const double from = std::ldexp(1.0, k - 1), to = std::ldexp(1.0, k) - 1;
        const Algorithm chosen = t.choose(collective, static_cast<size_t>(from)).value();
        const Algorithm at_top = cheapest(collective, shape, m, to);
        EXPECT_LE(worst_ratio(chosen, collective, shape, from, to),
                  worst_ratio(at_top, collective, shape, from, to) * 1.02)
            << collective_name(collective) << " " << shape.describe() << " class from " << from;
      }
    }
  }
}

// Small broadcasts and reduces at many ranks go down (up) a tree of radix 4:
// 5 levels at 1K ranks where the binomial tree has 10, for 3 messages a
// level (cohort-sim at 1K and 16K ranks: 1.20x the log2 P bound at 4 B,
// the binomial tree 2.20x). Its cost is not below the postal model's
// bound, which counts a rank's messages at message_s apart.
TEST(AlgorithmSelection, SmallBroadcastsAndReducesAtManyRanksTakeAKnomialTree) {
  reset_config("COHORT_ALGO");
  for (int p : {64, 1024, 16384}) {
    const AlgorithmTable table = AlgorithmTable::for_config(GroupShape::flat(p));
    EXPECT_EQ(table.choose(Collective::kBroadcast, 4).value(), Algorithm::kKnomialTree) << p;
    EXPECT_EQ(table.choose(Collective::kReduce, 4).value(), Algorithm::kKnomialTree) << p;
  }
  const CostModel m = CostModel::from_config();
  const GroupShape big = GroupShape::flat(1024);
  const double knomial = registry_entry(Algorithm::kKnomialTree).cost(Collective::kBroadcast, big, m, 4);
  EXPECT_LT(knomial, registry_entry(Algorithm::kBinomialTree).cost(Collective::kBroadcast, big, m, 4));
  EXPECT_GE(knomial, lower_bound(Collective::kBroadcast, big, m, 4).seconds);
  // The postal bound: with a message posted every message_s, 1024 ranks are
  // reached in fewer than log2 P half-latencies; with posting as slow as a
  // flight, it is exactly those.
  EXPECT_LT(lower_bound(Collective::kBroadcast, big, m, 4).seconds, 10 * m.network.latency_s / 2);
  CostModel slow = m;
  slow.message_s = slow.network.latency_s;
  EXPECT_NEAR(lower_bound(Collective::kBroadcast, big, slow, 4).seconds, 10 * m.network.latency_s / 2, 1e-7);
}

// A machine that runs several ranks a CPU makes each rank's work take that
// many times as long, and each step at least that many times a step's own
// work (the links' rates stay): 16 ranks on 2 cores (8 a CPU) take Bruck's all_to_all of small
// blocks (about half of pairwise's time, as measured), where 16 ranks with
// a CPU each keep pairwise; at 1 a CPU the model is unchanged.
TEST(AlgorithmSelection, ACrowdedMachinePricesEachRanksWorkByItsShareOfACpu) {
  reset_config("COHORT_ALGO");
  const CostModel m = CostModel::from_config();
  const CostModel one = m.on_crowded_machine(1);
  EXPECT_EQ(one.message_s, m.message_s);
  EXPECT_EQ(one.network.latency_s, m.network.latency_s);
  EXPECT_EQ(one.network.bytes_per_s, m.network.bytes_per_s);
  EXPECT_EQ(one.reduce_bytes_per_s, m.reduce_bytes_per_s);
  const CostModel eight = m.on_crowded_machine(8);
  EXPECT_DOUBLE_EQ(eight.message_s, 8 * std::max(m.message_s, m.crowded_message_s));
  EXPECT_DOUBLE_EQ(eight.network.bytes_per_s, m.network.bytes_per_s);
  EXPECT_DOUBLE_EQ(eight.copy_bytes_per_s, m.copy_bytes_per_s / 8);
  EXPECT_DOUBLE_EQ(eight.network.latency_s, std::max(m.network.latency_s, 8 * m.crowded_step_s));
  GroupShape sixteen = GroupShape::flat(16);
  const AlgorithmTable roomy = AlgorithmTable::for_config(sixteen);
  sixteen.ranks_per_cpu = 8;
  const AlgorithmTable crowded = AlgorithmTable::for_config(sixteen);
  EXPECT_NE(sixteen.describe().find("16 ranks, none sharing memory, 8 a CPU"), std::string::npos)
      << sixteen.describe();
  for (size_t block : {size_t{4}, size_t{32}, size_t{256}}) {
    EXPECT_EQ(roomy.choose(Collective::kAllToAll, block).value(), Algorithm::kPairwise) << block;
    EXPECT_EQ(crowded.choose(Collective::kAllToAll, block).value(), Algorithm::kBruck) << block;
  }
  // An entry's cost is priced in the crowded model: the same entry costs
  // more where the machine is crowded, and Bruck's now less than pairwise.
  const double bruck = registry_entry(Algorithm::kBruck).cost(Collective::kAllToAll, sixteen, m, 4);
  EXPECT_GT(bruck, registry_entry(Algorithm::kBruck).cost(Collective::kAllToAll, GroupShape::flat(16), m, 4));
  EXPECT_LT(bruck, registry_entry(Algorithm::kPairwise).cost(Collective::kAllToAll, sixteen, m, 4));
}

// The group counts its machines' crowding when it connects, from the
// places the ranks publish with their addresses: six ranks as threads
// bound to one CPU, over TCP, say "6 a CPU" and run Bruck's all_to_all;
// told COHORT_COST_RANKS_PER_CPU=1 (a CPU each, as on a cluster), the same
// ranks run pairwise. Both give every rank its blocks.
std::string log_of_a_small_all_to_all_on_one_cpu() {
  constexpr int kWorld = 6;
  set_config("COHORT_LOG_LEVEL", "warning");
  set_config("COHORT_DEBUG", "info");
  ::testing::internal::CaptureStderr();
  run_ranks_on_one_cpu(kWorld, [](ProcessGroup& g) {
    std::vector<float> in(kWorld), out(kWorld, -1.0f);
    for (int q = 0; q < kWorld; ++q) in[static_cast<size_t>(q)] = static_cast<float>(10 * g.rank() + q);
    g.all_to_all_single(Buffer::of(out), Buffer::of(in));
    for (int q = 0; q < kWorld; ++q) {
      ASSERT_EQ(out[static_cast<size_t>(q)], static_cast<float>(10 * q + g.rank()));
    }
  });
  const std::string log = ::testing::internal::GetCapturedStderr();
  reset_config("COHORT_DEBUG");
  reset_config("COHORT_LOG_LEVEL");
  return log;
}

TEST(AlgorithmSelection, RanksThatShareOneCpuCountTheirCrowdingAndTakeFewerMessages) {
  reset_config("COHORT_ALGO");
  set_config("COHORT_SHM", "off");
  const std::string crowded = log_of_a_small_all_to_all_on_one_cpu();
  set_config("COHORT_COST_RANKS_PER_CPU", "1");
  const std::string told = log_of_a_small_all_to_all_on_one_cpu();
  reset_config("COHORT_COST_RANKS_PER_CPU");
  reset_config("COHORT_SHM");
  EXPECT_EQ(times_in(crowded,
                     "all_to_all_single #1 of group test runs bruck: 4 bytes per rank, 6 ranks, none sharing "
                     "memory, 6 a CPU (logged once"),
            6u)
      << crowded;
  EXPECT_EQ(times_in(told,
                     "all_to_all_single #1 of group test runs pairwise: 4 bytes per rank, 6 ranks, none sharing "
                     "memory (logged once"),
            6u)
      << told;
}

// COHORT_COST_CROWDED_MESSAGE_US and _STEP_US (bench/calibrate_crowding.sh
// measures them) replace the crowded machine's defaults in the model: a
// dearer message keeps 16 ranks on 2 CPUs on Bruck's all_to_all (fewer
// messages) to larger blocks, a dearer step moves them to pairwise sooner.
TEST(AlgorithmSelection, TheCrowdedMachinesCostsAreTheConfigsWhenGiven) {
  reset_config("COHORT_ALGO");
  GroupShape crowded = GroupShape::flat(16);
  crowded.ranks_per_cpu = 8;
  auto bruck_up_to = [&] {
    const AlgorithmTable t = AlgorithmTable::for_config(crowded);
    size_t bytes = 1;
    while (bytes < (size_t{1} << 30) && t.choose(Collective::kAllToAll, bytes).value() == Algorithm::kBruck) {
      bytes *= 2;
    }
    return bytes;
  };
  const size_t by_default = bruck_up_to();
  EXPECT_DOUBLE_EQ(CostModel::from_config().crowded_message_s, 2.3e-6);
  set_config("COHORT_COST_CROWDED_MESSAGE_US", "20");
  EXPECT_DOUBLE_EQ(CostModel::from_config().crowded_message_s, 20e-6);
  const size_t dear_messages = bruck_up_to();
  reset_config("COHORT_COST_CROWDED_MESSAGE_US");
  set_config("COHORT_COST_CROWDED_STEP_US", "40");
  EXPECT_DOUBLE_EQ(CostModel::from_config().crowded_step_s, 40e-6);
  const size_t dear_steps = bruck_up_to();
  reset_config("COHORT_COST_CROWDED_STEP_US");
  EXPECT_GT(dear_messages, by_default);
  EXPECT_LT(dear_steps, by_default);
}

// A hierarchical all_gather whose columns' override cannot run fails with
// the override's reason on every rank, rather than running something else.
TEST(AlgorithmSelection, ARefusedColumnsOverrideFailsTheHierarchicalCollective) {
  set_config("COHORT_SHM_RANKS_PER_HOST", "2");
  set_config("COHORT_ALGO", "leaders.all_gather=recursive_halving");
  run_ranks(4, [](ProcessGroup& g) {
    std::vector<float> in(8, 1.0f), out(32, 0.0f);
    try {
      g.all_gather_into_tensor(Buffer::of(out), Buffer::of(in));
      ADD_FAILURE() << "a refused override ran";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("recursive_halving cannot run all_gather"), std::string::npos)
          << e.what();
    }
  });
  reset_config("COHORT_ALGO");
  reset_config("COHORT_SHM_RANKS_PER_HOST");
}

// The cost model never prices an algorithm below what any algorithm must
// pay (ceil(log2 P) latencies, or the bytes over a rank's link), and the
// table's predictions say how far each choice is from that bound.
TEST(AlgorithmSelection, NoAlgorithmIsPricedBelowTheLowerBound) {
  reset_config("COHORT_ALGO");
  const CostModel m = CostModel::from_config();
  const GroupShape big = GroupShape::flat(1024);
  LowerBound b = lower_bound(Collective::kAllReduce, big, m, 4);
  EXPECT_TRUE(b.latency_bound);
  EXPECT_DOUBLE_EQ(b.seconds, 10 * m.network.latency_s);
  b = lower_bound(Collective::kAllReduce, big, m, 16 << 20);
  EXPECT_FALSE(b.latency_bound);
  EXPECT_DOUBLE_EQ(b.seconds, 2.0 * 1023 / 1024 * (16 << 20) / m.network.bytes_per_s);
  for (int p : {2, 3, 7, 16, 1000, 16384}) {
    const GroupShape shape = GroupShape::flat(p);
    for (const AlgorithmEntry& e : algorithm_registry()) {
      for (int c = 0; c < kCollectives; ++c) {
        const Collective collective = static_cast<Collective>(c);
        if (!e.runs(collective) || !e.fits(shape.topology)) continue;
        for (double bytes : {0.0, 4.0, 65536.0, 16777216.0}) {
          EXPECT_GE(e.cost(collective, shape, m, bytes),
                    0.999 * lower_bound(collective, shape, m, bytes).seconds)
              << e.name << " " << collective_name(collective) << " P " << p << " bytes " << bytes;
        }
      }
    }
  }
  const std::string table = AlgorithmTable::for_config(big).predictions({4, 16 << 20});
  EXPECT_NE(table.find("| all_reduce | 4 | recursive_doubling | 200.0 us | 200.0 us | 1.00 | latency |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| all_gather | 16M | ring |"), std::string::npos) << table;
}

TEST(AlgorithmSelection, SizesReadAsBytesWithBinaryUnits) {
  size_t v = 0;
  EXPECT_TRUE(parse_size("64K", &v));
  EXPECT_EQ(v, size_t{64} << 10);
  EXPECT_TRUE(parse_size("3m", &v));
  EXPECT_EQ(v, size_t{3} << 20);
  EXPECT_TRUE(parse_size("0", &v));
  EXPECT_EQ(v, 0u);
  EXPECT_FALSE(parse_size("", &v));
  EXPECT_FALSE(parse_size("K", &v));
  EXPECT_FALSE(parse_size("12KB", &v));
  EXPECT_FALSE(parse_size("99999999999999999999G", &v));
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

// Where the table has two all_to_all algorithms by size, ranks whose own
// largest blocks fall on either side still choose alike: they agree on the
// largest block first. Rank 0 sends 8000-byte blocks, the others 400.
TEST(AlgorithmSelection, AllToAllRanksAgreeOnTheSizeBeforeChoosing) {
  set_config("COHORT_SHM", "off");
  set_config("COHORT_ALGO", "all_to_all:0-4K:bruck,all_to_all:4K-:pairwise");
  for (int world : {3, 5}) {
    run_ranks(world, [&](ProcessGroup& g) {
      const int r = g.rank();
      auto count = [](int from) { return from == 0 ? size_t{2000} : size_t{100}; };
      std::vector<std::vector<float>> ins, outs;
      std::vector<Buffer> in_views, out_views;
      for (int q = 0; q < world; ++q) {
        ins.emplace_back(count(r), static_cast<float>(10 * r + q));
        outs.emplace_back(count(q), -1.0f);
      }
      for (int q = 0; q < world; ++q) {
        in_views.push_back(Buffer::of(ins[q]));
        out_views.push_back(Buffer::of(outs[q]));
      }
      g.all_to_all(out_views, in_views);
      for (int q = 0; q < world; ++q)
        for (float v : outs[q]) ASSERT_EQ(v, static_cast<float>(10 * q + r));
      // Equal blocks of 400 bytes: Bruck's steps.
      check_all_to_all_even_splits(g);
    });
  }
  reset_config("COHORT_ALGO");
  reset_config("COHORT_SHM");
}

// all_to_all_single without split sizes runs Bruck's at once (torch's
// contract gives every rank one block size): right answers, and buffers
// that break the contract (rank 0's blocks of 2 floats, the others' of 3)
// fail on every rank, as a desync that names the sizes where a message's
// size is wrong, never as a wrong answer. The bad call has a group of its
// own: the first rank to fail aborts the group, which may catch a rank
// still finishing the collective before.
TEST(AlgorithmSelection, EvenAllToAllSingleRunsBrucksWithoutAgreeingAndUnequalBuffersFail) {
  set_config("COHORT_SHM", "off");
  set_config("COHORT_ALGO", "all_to_all=bruck");
  constexpr int kWorld = 4;
  run_ranks(kWorld, check_all_to_all_even_splits, std::chrono::seconds(20));
  std::vector<std::string> errors(kWorld);
  run_ranks(
      kWorld,
      [&](ProcessGroup& g) {
        const size_t block = g.rank() == 0 ? 2 : 3;
        std::vector<float> in(block * kWorld, 1.0f), out(block * kWorld, 0.0f);
        try {
          g.all_to_all_single(Buffer::of(out), Buffer::of(in))->wait();
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(g.rank())] = e.what();
        }
      },
      std::chrono::seconds(20));
  reset_config("COHORT_ALGO");
  reset_config("COHORT_SHM");
  bool named = false;
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(errors[static_cast<size_t>(r)].empty()) << "rank " << r << " exchanged unequal blocks";
    named = named || errors[static_cast<size_t>(r)].find("bytes but this rank expected") != std::string::npos;
  }
  EXPECT_TRUE(named) << errors[0] << "\n" << errors[1] << "\n" << errors[2] << "\n" << errors[3];
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
