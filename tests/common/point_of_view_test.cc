// Rewording a rank's message for the rank that reads it.
#include "common/point_of_view.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

TEST(PointOfView, TheSenderNamesItselfWhereItSaidThisRank) {
  EXPECT_EQ(as_said_by("rank 0 is in all_reduce #2 while this rank is in broadcast #2", 1),
            "rank 0 is in all_reduce #2 while rank 1 is in broadcast #2");
  // A text this rank read before (and now relays) has "this rank (N)".
  EXPECT_EQ(as_said_by("this rank (3) was waiting for this rank", 3), "rank 3 was waiting for rank 3");
  EXPECT_EQ(as_said_by("in this ranking", 1), "in this ranking") << "only the whole phrase";
}

TEST(PointOfView, TheReaderFindsItselfAsThisRankAndOnlyItsOwnNumber) {
  const std::string said = "rank 0 is in all_reduce #2 while rank 1 is in broadcast #2 (reported by rank 1)";
  EXPECT_EQ(as_read_by(said, 0),
            "this rank (0) is in all_reduce #2 while rank 1 is in broadcast #2 (reported by rank 1)");
  // Rank 1 must not take "rank 10" or "ranks [1]" for itself.
  EXPECT_EQ(as_read_by("rank 10 and ranks [1] wait for rank 1", 1),
            "rank 10 and ranks [1] wait for this rank (1)");
  EXPECT_EQ(as_read_by("prank 1", 1), "prank 1");
}

TEST(PointOfView, ARelayedTextReadsRightOnEveryRank) {
  const std::string on1 = "rank 0 is in all_reduce #2 while this rank is in broadcast #2";
  const std::string read_on0 = as_read_by(as_said_by(on1, 1), 0);
  // Rank 0 fails with it in turn and tells rank 2.
  const std::string read_on2 = as_read_by(as_said_by(read_on0, 0), 2);
  EXPECT_EQ(read_on2, "rank 0 is in all_reduce #2 while rank 1 is in broadcast #2");
}

}  // namespace
}  // namespace cohort
