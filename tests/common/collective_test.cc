// The one table of collectives (common/collective.h): every call and
// family is named, parses back, and belongs where the diagnostics and the
// algorithm table expect.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/collective.h"

namespace cohort {
namespace {

TEST(CollectiveTable, EveryCallAndFamilyHasItsOwnNameThatParsesBack) {
  std::set<std::string> names;
  for (int i = 1; i <= static_cast<int>(CollectiveCall::kBarrier); ++i) {
    const auto call = static_cast<CollectiveCall>(i);
    const CollectiveCallInfo& info = call_info(call);
    EXPECT_EQ(info.call, call);
    EXPECT_TRUE(names.insert(info.name).second) << info.name << " names two calls";
    CollectiveCall parsed = CollectiveCall::kNone;
    EXPECT_TRUE(parse_call(info.name, &parsed)) << info.name;
    EXPECT_EQ(parsed, call) << info.name;
  }
  for (int k = 0; k < kCollectives; ++k) {
    const auto family = static_cast<Collective>(k);
    Collective parsed = Collective::kBarrier;
    EXPECT_TRUE(parse_collective(collective_name(family), &parsed)) << collective_name(family);
    EXPECT_EQ(parsed, family);
    // Each family is also the name of its plain call, as torch names it.
    CollectiveCall call = CollectiveCall::kNone;
    ASSERT_TRUE(parse_call(collective_name(family), &call)) << collective_name(family);
    EXPECT_EQ(call_info(call).family, family);
  }
  CollectiveCall untouched = CollectiveCall::kBarrier;
  EXPECT_FALSE(parse_call("send", &untouched));
  EXPECT_FALSE(parse_call("no collective", &untouched));
  EXPECT_EQ(untouched, CollectiveCall::kBarrier);
  EXPECT_STREQ(call_name(static_cast<CollectiveCall>(200)), "no collective");
}

TEST(CollectiveTable, EachFormOfACallBelongsToItsFamilyAndSaysWhatMustAgree) {
  EXPECT_EQ(call_info(CollectiveCall::kAllGatherIntoTensor).family, Collective::kAllGather);
  EXPECT_EQ(call_info(CollectiveCall::kReduceScatterTensor).family, Collective::kReduceScatter);
  EXPECT_EQ(call_info(CollectiveCall::kAllToAllSingle).family, Collective::kAllToAll);
  EXPECT_EQ(call_info(CollectiveCall::kAllReduceCoalesced).family, Collective::kAllReduce);
  // Uneven forms: all_gather's inputs and reduce_scatter's outputs may
  // differ by rank; the tensor forms' may not.
  EXPECT_FALSE(call_info(CollectiveCall::kAllGather).fingerprint_count_agrees);
  EXPECT_TRUE(call_info(CollectiveCall::kAllGatherIntoTensor).fingerprint_count_agrees);
  EXPECT_FALSE(call_info(CollectiveCall::kReduceScatter).fingerprint_count_agrees);
  EXPECT_TRUE(call_info(CollectiveCall::kReduceScatterTensor).fingerprint_count_agrees);
  EXPECT_EQ(call_info(CollectiveCall::kAllGather).recorded_count, SameCount::kOutput);
  EXPECT_EQ(call_info(CollectiveCall::kGather).recorded_count, SameCount::kNone);
}

TEST(CollectiveTable, TheUnrootedFamiliesLeaveTogetherAndTheRootedOnesDoNot) {
  std::set<Collective> together;
  for (int i = 0; i < kLeaveTogether; ++i) {
    const Collective family = leave_together_family(i);
    EXPECT_EQ(straggler_index(family), i);
    together.insert(family);
  }
  EXPECT_EQ(together, (std::set<Collective>{Collective::kAllReduce, Collective::kAllGather,
                                            Collective::kReduceScatter, Collective::kAllToAll,
                                            Collective::kBarrier}));
  for (Collective rooted : {Collective::kBroadcast, Collective::kReduce, Collective::kGather, Collective::kScatter}) {
    EXPECT_FALSE(leaves_together(rooted)) << collective_name(rooted);
  }
}

}  // namespace
}  // namespace cohort
