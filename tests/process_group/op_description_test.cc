// The description of every blocking collective is counted up in place;
// these check it against one written from scratch.
#include "process_group/op_description.h"

#include <gtest/gtest.h>

#include <string>

namespace cohort {
namespace {

std::string fresh(const std::string& op, uint64_t sequence, const std::string& group) {
  return op + " #" + std::to_string(sequence) + " of group " + group;
}

TEST(OpDescriptionTest, CountingUpMatchesAFreshTextAcrossEveryDigitBoundary) {
  std::string text;
  uint64_t held = 0;
  const char* held_op = nullptr;
  for (uint64_t s = 1; s <= 100001; ++s) {
    describe_into(&text, &held, &held_op, "all_reduce", s, "g9");
    ASSERT_EQ(text, fresh("all_reduce", s, "g9"));
    ASSERT_EQ(held, s);
  }
}

TEST(OpDescriptionTest, AnotherOpOrAGapInTheNumbersRewritesTheWholeText) {
  std::string text;
  uint64_t held = 0;
  const char* held_op = nullptr;
  describe_into(&text, &held, &held_op, "barrier", 9, "default");
  EXPECT_EQ(text, "barrier #9 of group default");
  describe_into(&text, &held, &held_op, "broadcast", 10, "default");  // another op, next number
  EXPECT_EQ(text, "broadcast #10 of group default");
  describe_into(&text, &held, &held_op, "broadcast", 99, "default");  // a gap
  EXPECT_EQ(text, "broadcast #99 of group default");
  describe_into(&text, &held, &held_op, "broad", 100, "default");  // a prefix of the last op
  EXPECT_EQ(text, "broad #100 of group default");
  describe_into(&text, &held, &held_op, "all_reduce_coalesced", 18446744073709551615ull, "default");
  EXPECT_EQ(text, "all_reduce_coalesced #18446744073709551615 of group default");
}

}  // namespace
}  // namespace cohort
