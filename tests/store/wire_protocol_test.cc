// The store protocol's decoder: every request round-trips, and malformed
// input is rejected with a reason instead of being trusted.
#include <gtest/gtest.h>

#include "common/byte_codec.h"
#include "store/wire_protocol.h"

namespace cohort::wire {
namespace {

const Limits kLimits{64, 1 << 20};

Request round_trip(const Request& q) {
  std::vector<uint8_t> frame;
  encode_request(q, &frame);
  auto len = frame_length(frame.data(), frame.size(), kLimits);
  EXPECT_TRUE(len.ok());
  EXPECT_EQ(*len.value(), frame.size() - kFrameHeaderBytes);
  auto back = decode_request(frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, kLimits);
  EXPECT_TRUE(back.ok()) << back.status().message();
  return back.value();
}

TEST(WireProtocolTest, EveryRequestRoundTrips) {
  Request set{Op::kSet, {"key"}, {{1, 2, 3}}, 0};
  Request back = round_trip(set);
  EXPECT_EQ(back.op, Op::kSet);
  EXPECT_EQ(back.keys, set.keys);
  EXPECT_EQ(back.values, set.values);

  Request get{Op::kGet, {"k"}, {}, 1500};
  EXPECT_EQ(round_trip(get).number, 1500);

  Request cas{Op::kCompareSet, {"k"}, {{}, {9}}, 0};
  EXPECT_EQ(round_trip(cas).values, cas.values);

  Request wait{Op::kWait, {"a", "b", ""}, {}, 7};
  EXPECT_EQ(round_trip(wait).keys, wait.keys);

  Request ms{Op::kMultiSet, {"a", "b"}, {{1}, {2, 2}}, 0};
  back = round_trip(ms);
  EXPECT_EQ(back.keys, ms.keys);
  EXPECT_EQ(back.values, ms.values);

  Request add{Op::kAdd, {"n"}, {}, -42};
  EXPECT_EQ(round_trip(add).number, -42);

  for (Op op : {Op::kNumKeys, Op::kPing}) EXPECT_EQ(round_trip(Request{op, {}, {}, 0}).op, op);
}

TEST(WireProtocolTest, FrameLengthOverTheLimitIsRejected) {
  std::vector<uint8_t> header;
  ByteWriter(&header).u64(uint64_t{1} << 63);
  auto r = frame_length(header.data(), header.size(), kLimits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("9223372036854775808"), std::string::npos) << r.status().message();
}

TEST(WireProtocolTest, IncompleteHeaderAsksForMore) {
  uint8_t three[3] = {1, 0, 0};
  auto r = frame_length(three, 3, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().has_value());
}

TEST(WireProtocolTest, UnknownOpcodeIsNamed) {
  uint8_t body[] = {200};
  auto r = decode_request(body, 1, kLimits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown opcode 200"), std::string::npos);
}

TEST(WireProtocolTest, TruncatedRequestIsRejected) {
  std::vector<uint8_t> frame;
  encode_request(Request{Op::kSet, {"key"}, {{1, 2, 3, 4}}, 0}, &frame);
  for (size_t cut = kFrameHeaderBytes + 1; cut < frame.size(); ++cut) {
    auto r = decode_request(frame.data() + kFrameHeaderBytes, cut - kFrameHeaderBytes, kLimits);
    EXPECT_FALSE(r.ok()) << "accepted a request cut at " << cut;
  }
}

TEST(WireProtocolTest, KeyOverTheLimitIsRejected) {
  std::vector<uint8_t> frame;
  encode_request(Request{Op::kGet, {std::string(65, 'k')}, {}, 0}, &frame);
  auto r = decode_request(frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, kLimits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("COHORT_STORE_MAX_KEY_BYTES"), std::string::npos);
}

TEST(WireProtocolTest, TrailingBytesAreRejected) {
  std::vector<uint8_t> frame;
  encode_request(Request{Op::kNumKeys, {}, {}, 0}, &frame);
  frame.push_back(0);
  auto r = decode_request(frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, kLimits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("trailing"), std::string::npos);
}

TEST(WireProtocolTest, AHugeKeyCountCannotDriveTheDecoder) {
  std::vector<uint8_t> body;
  ByteWriter w(&body);
  w.u8(static_cast<uint8_t>(Op::kCheck));
  w.u32(0xFFFFFFFFu);
  auto r = decode_request(body.data(), body.size(), kLimits);
  EXPECT_FALSE(r.ok());
}

TEST(WireProtocolTest, RepliesRoundTrip) {
  std::vector<uint8_t> frame;
  Bytes v = {5, 6};
  encode_ok_values({&v}, &frame);
  auto r =
      decode_reply(Op::kGet, frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().values.at(0), v);

  frame.clear();
  encode_timeout({"x", "y"}, &frame);
  r = decode_reply(Op::kWait, frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().status, ReplyStatus::kTimeout);
  EXPECT_EQ(r.value().missing, (std::vector<std::string>{"x", "y"}));

  frame.clear();
  encode_error(invalid_argument("bad add"), &frame);
  r = decode_reply(Op::kAdd, frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().error_code, StatusCode::kInvalidArgument);
  EXPECT_EQ(r.value().error_message, "bad add");
}

TEST(WireProtocolTest, ProofsDependOnTokenAndNonces) {
  Digest n1{}, n2{};
  n2[0] = 1;
  EXPECT_FALSE(digests_equal(server_proof("a", n1), server_proof("b", n1)));
  EXPECT_FALSE(digests_equal(server_proof("a", n1), server_proof("a", n2)));
  EXPECT_FALSE(digests_equal(client_proof("a", n1, n2), client_proof("a", n2, n1)));
  EXPECT_TRUE(digests_equal(client_proof("a", n1, n2), client_proof("a", n1, n2)));
}

}  // namespace
}  // namespace cohort::wire
