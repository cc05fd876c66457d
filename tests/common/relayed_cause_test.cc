// A failure's cause as fields: what travels between the ranks, and the
// words each rank reads it in.
#include "common/relayed_cause.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

RelayedCause desync_seen_by_1() {
  RelayedCause c;
  c.code = StatusCode::kDesync;
  c.origin = 1;
  c.text = "rank 0 is in all_reduce #2 while this rank is in broadcast #2";
  return c;
}

TEST(RelayedCause, EveryFieldSurvivesTheFrame) {
  RelayedCause sent = desync_seen_by_1();
  sent.waits.push_back({2, "still waiting to receive from ranks [1]"});
  sent.waits.push_back({7, "still sending to ranks [2]"});
  const std::vector<uint8_t> bytes = encode_cause(sent);
  RelayedCause got;
  ASSERT_TRUE(decode_cause(bytes.data(), bytes.size(), &got));
  EXPECT_EQ(got.code, StatusCode::kDesync);
  EXPECT_EQ(got.origin, 1);
  EXPECT_EQ(got.text, sent.text);
  ASSERT_EQ(got.waits.size(), 2u);
  EXPECT_EQ(got.waits[1].rank, 7);
  EXPECT_EQ(got.waits[1].owed, "still sending to ranks [2]");
}

TEST(RelayedCause, BytesThatAreNotACauseAreRefused) {
  const std::vector<uint8_t> bytes = encode_cause(desync_seen_by_1());
  RelayedCause got;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(decode_cause(bytes.data(), cut, &got)) << "cut to " << cut << " bytes";
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decode_cause(longer.data(), longer.size(), &got)) << "a byte too many";
  // A code that a peer's failure cannot be (an argument error there) reads
  // as a network error here.
  RelayedCause odd = desync_seen_by_1();
  odd.code = StatusCode::kInvalidArgument;
  const std::vector<uint8_t> odd_bytes = encode_cause(odd);
  ASSERT_TRUE(decode_cause(odd_bytes.data(), odd_bytes.size(), &got));
  EXPECT_EQ(got.code, StatusCode::kNetworkError);
}

TEST(RelayedCause, EachRankReadsTheChainInItsOwnWords) {
  // Rank 1 saw the desync; rank 0 reads it with nothing owed, relays the
  // fields, and rank 2, which was waiting for rank 1, reads them.
  const RelayedCause seen = cause_to_relay(Status(StatusCode::kDesync, desync_seen_by_1().text), 1);
  EXPECT_EQ(seen.origin, 1);
  const Status on0 = relayed_failure(seen, 0, "");
  EXPECT_EQ(on0.code(), StatusCode::kDesync);
  EXPECT_EQ(on0.message(),
            "this rank (0) is in all_reduce #2 while rank 1 is in broadcast #2 (reported by rank 1)");
  const Status on2 = relayed_failure(cause_to_relay(on0, 0), 2, "still waiting to receive from ranks [1]");
  EXPECT_EQ(on2.message(),
            "rank 0 is in all_reduce #2 while rank 1 is in broadcast #2 (reported by rank 1); "
            "rank 2 was itself still waiting to receive from ranks [1]");
  // Rank 2 relays on to rank 3: the origin and both ranks' words are the
  // fields, not rank 2's rewording of rank 0's.
  const RelayedCause from2 = cause_to_relay(on2.with_context("all_reduce #2 of group g"), 2);
  EXPECT_EQ(from2.origin, 1);
  EXPECT_EQ(from2.text, desync_seen_by_1().text);
  ASSERT_EQ(from2.waits.size(), 1u);
  EXPECT_EQ(from2.waits[0].rank, 2);
  EXPECT_EQ(relayed_failure(from2, 3, "").message(),
            "rank 0 is in all_reduce #2 while rank 1 is in broadcast #2 (reported by rank 1); "
            "rank 2 was itself still waiting to receive from ranks [1]");
}

TEST(RelayedCause, AStatusKeepsItsCauseWhenCopiedAndGivenContext) {
  const Status failed = relayed_failure(desync_seen_by_1(), 0, "");
  ASSERT_NE(failed.cause(), nullptr);
  const Status copy = failed;  // NOLINT: the copy is what is tested
  EXPECT_EQ(copy.cause(), failed.cause());
  EXPECT_EQ(failed.with_context("in barrier").cause(), failed.cause());
  EXPECT_EQ(network_error("seen here").cause(), nullptr);
  EXPECT_EQ(Status::ok_status().cause(), nullptr);
}

}  // namespace
}  // namespace cohort
