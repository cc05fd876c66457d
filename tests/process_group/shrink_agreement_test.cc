// The survivors' agreement behind shrink_group, with ranks as threads on
// one HashStore: who is waited for, who is left out, and that every rank
// reads the same list. shrink_group itself runs in real processes
// (process_test.cc: SurvivorsShrinkTheDefaultGroup...).
#include <gtest/gtest.h>

#include <thread>

#include "cohort/errors.h"
#include "cohort/hash_store.h"
#include "process_group/shrink_agreement.h"

namespace cohort {
namespace {

using std::chrono::milliseconds;

TEST(ShrinkAgreement, VotesRoundTripAndMalformedRecordsAreNamed) {
  const auto votes = parse_votes(encode_vote({2, {1, 3}}) + encode_vote({0, {}}));
  ASSERT_EQ(votes.size(), 2u);
  EXPECT_EQ(votes[0].rank, 2);
  EXPECT_EQ(votes[0].suspects, (std::vector<int>{1, 3}));
  EXPECT_EQ(votes[1].rank, 0);
  EXPECT_TRUE(votes[1].suspects.empty());
  try {
    parse_votes("2:x;");
    FAIL() << "a malformed record was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'2:x'"), std::string::npos) << e.what();
  }
}

TEST(ShrinkAgreement, DecidesOnlyWhenEveryRankArrivedOrIsSuspected) {
  std::vector<SurvivorVote> votes = {{0, {2}}, {1, {}}};
  EXPECT_FALSE(may_decide(votes, {}, 4));  // nobody accounts for rank 3
  EXPECT_TRUE(may_decide(votes, {3}, 4));  // excluded by the caller
  votes.push_back({3, {}});
  EXPECT_TRUE(may_decide(votes, {}, 4));
  // Arrived ranks are members even when someone suspected them.
  votes.push_back({2, {}});
  EXPECT_EQ(members_of(votes, {}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(members_of(votes, {1}), (std::vector<int>{0, 2, 3}));
}

// run_survivors runs agree_on_survivors for each rank in `arriving` on its
// own thread (rank r's suspects in suspects[r]) and returns each one's
// result, or its error text.
std::vector<std::string> run_survivors(Store& store, const std::vector<int>& arriving,
                                       const std::vector<std::vector<int>>& suspects, int size,
                                       AgreementOptions options) {
  std::vector<std::string> results(arriving.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < arriving.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        auto members = agree_on_survivors(store, "shrink/", {arriving[i], suspects[arriving[i]]}, size, {},
                                          options, "shrink_group of group test");
        for (int m : members) results[i] += std::to_string(m) + " ";
      } catch (const Error& e) {
        results[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(ShrinkAgreement, SurvivorsAgreeWithoutWaitingForARankOneOfThemSawDie) {
  HashStore store;
  AgreementOptions options;
  options.timeout = std::chrono::seconds(60);  // must not be what ends the wait
  options.grace = milliseconds(20);
  const auto start = std::chrono::steady_clock::now();
  auto results = run_survivors(store, {0, 1, 3}, {{}, {2}, {}, {}}, 4, options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  for (const auto& r : results) EXPECT_EQ(r, "0 1 3 ");
}

TEST(ShrinkAgreement, ARankNobodySuspectsIsWaitedForUntilTheTimeout) {
  HashStore store;
  AgreementOptions options;
  options.timeout = milliseconds(300);
  options.grace = milliseconds(20);
  const auto start = std::chrono::steady_clock::now();
  auto results = run_survivors(store, {0, 1}, {{}, {}, {}}, 3, options);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(300));
  for (const auto& r : results) EXPECT_EQ(r, "0 1 ");
}

TEST(ShrinkAgreement, ARankArrivingAfterTheListWasFixedIsToldItWasLeftOut) {
  HashStore store;
  AgreementOptions options;
  options.grace = milliseconds(10);
  // Ranks 0 and 1 agree without rank 2 (rank 0 saw it go)...
  auto results = run_survivors(store, {0, 1}, {{2}, {}, {}}, 3, options);
  for (const auto& r : results) EXPECT_EQ(r, "0 1 ");
  // ...which then turns up after all.
  results = run_survivors(store, {2}, {{}, {}, {}}, 3, options);
  EXPECT_NE(results[0].find("this rank (2) is not among the survivors agreed on, [0, 1]"), std::string::npos)
      << results[0];
}

}  // namespace
}  // namespace cohort
