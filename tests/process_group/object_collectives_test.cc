// The object collectives for byte strings: objects of different sizes on
// every rank (empty ones too), roots other than 0, a list of the wrong
// length, and a non-member's handle. Ranks are threads.
#include <gtest/gtest.h>

#include <string>

#include "cohort/errors.h"
#include "cohort/object_collectives.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

// object_of is rank r's object: r * 37 bytes of 'a' + r (rank 0's is empty).
Bytes object_of(int r) {
  return Bytes(static_cast<size_t>(r) * 37, static_cast<uint8_t>('a' + r));
}

TEST(ObjectCollectives, AllGatherObjectCarriesEveryRanksObjectWhateverItsSize) {
  run_group_ranks(3, [](const GroupPtr& g) {
    std::vector<Bytes> all(3);
    all_gather_object(all, object_of(g->rank()), g);
    for (int q = 0; q < 3; ++q) EXPECT_EQ(all[static_cast<size_t>(q)], object_of(q)) << "from rank " << q;
  });
}

TEST(ObjectCollectives, BroadcastObjectListReplacesEveryEntryWithTheRootsOwn) {
  run_group_ranks(3, [](const GroupPtr& g) {
    std::vector<Bytes> list(4);
    if (g->rank() == 2) list = {to_bytes("first"), Bytes{}, Bytes(5000, 7), to_bytes("last")};
    broadcast_object_list(list, /*src=*/2, g);
    EXPECT_EQ(list, (std::vector<Bytes>{to_bytes("first"), Bytes{}, Bytes(5000, 7), to_bytes("last")}));
  });
}

TEST(ObjectCollectives, GatherObjectFillsTheRootsListOnly) {
  run_group_ranks(4, [](const GroupPtr& g) {
    std::vector<Bytes> gathered(4);
    gather_object(object_of(g->rank()), g->rank() == 1 ? &gathered : nullptr, /*dst=*/1, g);
    if (g->rank() == 1) {
      for (int q = 0; q < 4; ++q) EXPECT_EQ(gathered[static_cast<size_t>(q)], object_of(q));
    }
  });
}

TEST(ObjectCollectives, ScatterObjectListGivesEachRankItsEntry) {
  run_group_ranks(3, [](const GroupPtr& g) {
    std::vector<Bytes> inputs;
    if (g->rank() == 0) inputs = {object_of(2), object_of(0), object_of(1)};
    std::vector<Bytes> out(1);
    scatter_object_list(out, inputs, /*src=*/0, g);
    const int want[] = {2, 0, 1};
    EXPECT_EQ(out[0], object_of(want[g->rank()]));
  });
}

TEST(ObjectCollectives, AListOfTheWrongLengthNamesBothLengths) {
  run_group_ranks(2, [](const GroupPtr& g) {
    std::vector<Bytes> too_short(1);
    try {
      all_gather_object(too_short, object_of(1), g);
      ADD_FAILURE() << "accepted a list of 1 for 2 ranks";
    } catch (const InvalidArgument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("has 1 entries"), std::string::npos) << m;
      EXPECT_NE(m.find("2 ranks"), std::string::npos) << m;
    }
    // Checked before anything is sent: the group still works.
    std::vector<Bytes> all(2);
    all_gather_object(all, object_of(g->rank()), g);
    EXPECT_EQ(all[1], object_of(1));
  });
}

TEST(ObjectCollectives, OnANonMembersHandleTheyDoNothing) {
  const GroupPtr outside = ProcessGroup::non_member({0, 1}, "group_1");
  std::vector<Bytes> list = {to_bytes("kept")};
  all_gather_object(list, to_bytes("x"), outside);
  broadcast_object_list(list, 0, outside);
  scatter_object_list(list, {}, 0, outside);
  gather_object(to_bytes("x"), nullptr, 0, outside);
  EXPECT_EQ(list, std::vector<Bytes>{to_bytes("kept")});
}

}  // namespace
}  // namespace cohort::testing
