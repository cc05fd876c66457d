// Where a rank runs (transport/rank_place.h): the place it publishes with
// its address, and the crowding a group's places add up to.
#include "transport/rank_place.h"

#include <gtest/gtest.h>

#include "common/cpu_binding.h"

namespace cohort::testing {
namespace {

TEST(RankPlace, ThisRankPublishesItsMachineAndTheCpusItMayRunOn) {
  const RankPlace here = parse_rank_place(this_rank_place());
  EXPECT_FALSE(here.machine.empty()) << this_rank_place();
  EXPECT_EQ(here.cpus, affinity_of_this_thread()) << this_rank_place();
}

TEST(RankPlace, AMachinesRanksCountAgainstTheCpusTheyMayUseBetweenThem) {
  auto place = [](const char* machine, std::vector<int> cpus) { return RankPlace{machine, std::move(cpus)}; };
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
}

}  // namespace
}  // namespace cohort::testing
