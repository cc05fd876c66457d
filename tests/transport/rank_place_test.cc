// Where a rank runs (transport/rank_place.h): the place it publishes with
// its address, and the crowding a group's places add up to.
#include "transport/rank_place.h"

#include <gtest/gtest.h>

#include "common/cpu_binding.h"
#include "cohort/config.h"
#include "transport/shm/connect.h"
#include "transport/shm/host_identity.h"

namespace cohort::testing {
namespace {

TEST(RankPlace, ThisRankPublishesItsMachineAndTheCpusItMayRunOn) {
  const RankPlace here = parse_rank_place(this_rank_place());
  EXPECT_FALSE(here.machine.empty()) << this_rank_place();
  EXPECT_EQ(here.cpus, affinity_of_this_thread()) << this_rank_place();
  EXPECT_EQ(here.host, shm::host_identity()) << this_rank_place();
}

TEST(RankPlace, AMachinesRanksCountAgainstTheCpusTheyMayUseBetweenThem) {
  auto place = [](const char* machine, std::vector<int> cpus) {
    return RankPlace{machine, std::move(cpus), ""};
  };
  // Machine a: 4 ranks, two bound to CPU 0 and two to CPU 1: 2 a CPU.
  // Machine b: 2 ranks free to use 8 CPUs: a quarter each.
  const std::vector<RankPlace> group = {place("a", {0}),          place("a", {0}),
                                        place("a", {1}),          place("a", {1}),
                                        place("b", {0, 1, 2, 3}), place("b", {4, 5, 6, 7})};
  EXPECT_DOUBLE_EQ(ranks_per_cpu(group), 2.0);
  // The most crowded machine sets the pace: 3 ranks on b's CPU 0.
  std::vector<RankPlace> crowded_b = group;
  crowded_b[4].cpus = {0};
  crowded_b[5].cpus = {0};
  crowded_b.push_back(place("b", {0}));
  EXPECT_DOUBLE_EQ(ranks_per_cpu(crowded_b), 3.0);
  // Never below 1, and a place not known (an empty record) crowds nobody.
  EXPECT_DOUBLE_EQ(ranks_per_cpu({place("b", {0, 1, 2, 3})}), 1.0);
  EXPECT_DOUBLE_EQ(ranks_per_cpu({RankPlace{}, RankPlace{}, place("a", {0, 1})}), 1.0);
  EXPECT_DOUBLE_EQ(ranks_per_cpu({}), 1.0);
}

TEST(RankPlace, AnUnreadablePlaceIsLeftEmpty) {
  EXPECT_TRUE(parse_rank_place("").machine.empty());
  const RankPlace no_cpus = parse_rank_place("boot-1 not-a-list");
  EXPECT_EQ(no_cpus.machine, "boot-1");
  EXPECT_TRUE(no_cpus.cpus.empty());
  EXPECT_TRUE(parse_rank_place("? 0-3").machine.empty());
  EXPECT_EQ(parse_rank_place("boot-1 0-2,5").cpus, (std::vector<int>{0, 1, 2, 5}));
  EXPECT_TRUE(parse_rank_place("boot-1 0-2,5").host.empty());
  const RankPlace whole = parse_rank_place("boot-1 ? boot=boot-1 shm=3:4 pid=5");
  EXPECT_TRUE(whole.cpus.empty());
  EXPECT_EQ(whole.host, "boot=boot-1 shm=3:4 pid=5");
}

// The hosts come from the published identities: each rank's leader is the
// lowest rank with its identity; a rank whose identity is unknown is a
// host of its own; pretend hosts split one identity by global rank.
TEST(RankPlace, HostsAreTheRanksThatPublishedOneIdentity) {
  auto on = [](const char* host) { return RankPlace{"m", {0}, host}; };
  const std::vector<RankPlace> places = {on("x"), on("y"), on("x"), on(""), on("y"), on("x")};
  EXPECT_EQ(shm::host_leaders(places, {0, 1, 2, 3, 4, 5}), (std::vector<int>{0, 1, 0, 3, 1, 0}));
  set_config("COHORT_SHM_RANKS_PER_HOST", "3");
  // Global ranks 10-15 in pretend hosts of 3 ({10, 11}, {12, 13, 14}, {15}):
  // no two ranks share both an identity and a pretend host.
  EXPECT_EQ(shm::host_leaders(places, {10, 11, 12, 13, 14, 15}), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(shm::host_leaders({on("x"), on("x"), on("x"), on("x")}, {0, 1, 2, 3}),
            (std::vector<int>{0, 0, 0, 3}));
  reset_config("COHORT_SHM_RANKS_PER_HOST");
}

// A host's ranks outnumber their CPUs by the union of their published
// affinities: two on CPU 0 do, two bound to CPUs 0 and 1 do not; a rank of
// unknown CPUs makes the union unknown.
TEST(RankPlace, TheCpusOfAHostsRanksAreTheUnionOfTheirAffinities) {
  auto bound = [](std::vector<int> cpus) { return RankPlace{"m", std::move(cpus), "h"}; };
  const std::vector<RankPlace> places = {bound({0}), bound({0}), bound({1}), bound({2, 3}), bound({})};
  EXPECT_EQ(cpus_of_ranks(places, {0, 1}), (std::vector<int>{0}));
  EXPECT_EQ(cpus_of_ranks(places, {0, 2}), (std::vector<int>{0, 1}));
  EXPECT_EQ(cpus_of_ranks(places, {3, 2, 0}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(cpus_of_ranks(places, {0, 4}).empty()) << "rank 4's CPUs are unknown";
  EXPECT_TRUE(cpus_of_ranks(places, {0, 7}).empty()) << "rank 7 has no place";
}

}  // namespace
}  // namespace cohort::testing
