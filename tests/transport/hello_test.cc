// The data-plane hello (src/transport/tcp/hello.h): what a caller says and
// how an acceptor judges it, without sockets.
#include "transport/tcp/hello.h"

#include <gtest/gtest.h>

namespace cohort::tcp {
namespace {

GroupCredentials group(uint8_t seed, const std::string& token = "") {
  GroupCredentials c;
  c.nonce.fill(seed);
  c.token = token;
  c.identity = "pid 7 on host h of job j";
  return c;
}

TEST(DataPlaneHello, RoundTripsThroughItsBytesAndSaysHowLongItIs) {
  const Hello sent = make_hello(group(3, "secret"), 2, 0, 4);
  const std::vector<uint8_t> bytes = encode_hello(sent);
  EXPECT_EQ(hello_bytes_needed(bytes.data(), 4), hello_bytes_needed(bytes.data(), 10));
  EXPECT_LT(hello_bytes_needed(bytes.data(), 4), bytes.size()) << "the fixed part comes before the identity";
  EXPECT_EQ(hello_bytes_needed(bytes.data(), bytes.size()), bytes.size());
  const Hello got = decode_hello(bytes.data(), bytes.size());
  EXPECT_EQ(got.rank, 2);
  EXPECT_EQ(got.size, 4);
  EXPECT_EQ(got.nonce, sent.nonce);
  EXPECT_EQ(got.proof, sent.proof);
  EXPECT_EQ(got.identity, "pid 7 on host h of job j");
}

TEST(DataPlaneHello, BytesThatAreNotAHelloAreSaidSo) {
  const std::vector<uint8_t> http = {'G', 'E', 'T', ' ', '/', ' ', 'H'};
  EXPECT_EQ(hello_bytes_needed(http.data(), http.size()), 0u);
  // The old 12-byte hello (magic "CHEL") is not this one either.
  const std::vector<uint8_t> old = {0x43, 0x48, 0x45, 0x4c, 1, 0, 0, 0, 2, 0, 0, 0};
  EXPECT_EQ(hello_bytes_needed(old.data(), old.size()), 0u);
}

TEST(DataPlaneHello, APeerOfTheGroupIsWelcome) {
  const GroupCredentials mine = group(3, "secret");
  EXPECT_EQ(judge_hello(make_hello(mine, 2, 0, 4), mine, 0, 4, false), std::nullopt);
  const GroupCredentials open = group(3);
  EXPECT_EQ(judge_hello(make_hello(open, 2, 0, 4), open, 0, 4, false), std::nullopt);
}

TEST(DataPlaneHello, EachWayOfNotBeingAPeerHasItsReason) {
  const GroupCredentials mine = group(3, "secret");
  EXPECT_EQ(judge_hello(make_hello(mine, 2, 0, 5), mine, 0, 4, false), Refusal::kWorldSize);
  EXPECT_EQ(judge_hello(make_hello(mine, 0, 0, 4), mine, 0, 4, false), Refusal::kRankOutOfRange);
  EXPECT_EQ(judge_hello(make_hello(mine, 9, 0, 4), mine, 0, 4, false), Refusal::kRankOutOfRange);
  EXPECT_EQ(judge_hello(make_hello(group(4, "secret"), 2, 0, 4), mine, 0, 4, false), Refusal::kOtherGroup);
  EXPECT_EQ(judge_hello(make_hello(group(3, "guess"), 2, 0, 4), mine, 0, 4, false), Refusal::kBadProof);
  EXPECT_EQ(judge_hello(make_hello(group(3), 2, 0, 4), mine, 0, 4, false), Refusal::kBadProof);
  EXPECT_EQ(judge_hello(make_hello(mine, 2, 0, 4), mine, 0, 4, true), Refusal::kSeatTaken);
  // A proof made for another receiver cannot be shown to this one.
  EXPECT_EQ(judge_hello(make_hello(mine, 2, 1, 4), mine, 0, 4, false), Refusal::kBadProof);
}

TEST(DataPlaneHello, RefusalsAreWordedFromEachSidesPointOfView) {
  const Hello stranger = make_hello(group(4), 1, 0, 2);
  const std::string ours = refused_by_us(Refusal::kOtherGroup, stranger, 0, 2);
  EXPECT_NE(ours.find("rank 0 refused a connection from pid 7 on host h of job j, calling itself rank 1"),
            std::string::npos)
      << ours;
  const std::string theirs = refused_by_them(Refusal::kOtherGroup, 1, 0, "10.0.0.1:4000", "pid 8 on host g");
  EXPECT_NE(theirs.find("rank 0 at 10.0.0.1:4000 (pid 8 on host g) refused this process as rank 1"),
            std::string::npos)
      << theirs;
  EXPECT_NE(theirs.find("another group or job"), std::string::npos) << theirs;
}

}  // namespace
}  // namespace cohort::tcp
