// cohort's own SHA-256 and HMAC-SHA256 (src/common/hmac.cc): the published
// vectors, every length across the block and padding edges, and, where
// OpenSSL is found, the same answers as OpenSSL's on random keys and data.
#include "common/hmac.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#if defined(COHORT_TEST_HAVE_OPENSSL)
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

namespace cohort {
namespace {

std::string hex(const Digest& d) {
  std::string out;
  char two[3];
  for (uint8_t b : d) {
    std::snprintf(two, sizeof two, "%02x", b);
    out += two;
  }
  return out;
}

std::string sha_of(const std::string& s) {
  return hex(sha256(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

std::vector<uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

// FIPS 180-4's examples (and the NIST one-million-a test).
TEST(Sha256, GivesTheStandardsDigests) {
  EXPECT_EQ(sha_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha_of(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// RFC 4231's test cases 1, 2 and 6 (a key longer than a block is hashed).
TEST(HmacSha256, GivesRfc4231sAnswers) {
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), bytes_of("Hi There"))),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", bytes_of("what do ya want for nothing?"))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'),
                            bytes_of("Test Using Larger Than Block-Size Key - Hash Key First"))),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, ADifferentKeyOrMessageGivesADifferentDigest) {
  const Digest d = hmac_sha256("token", bytes_of("nonce"));
  EXPECT_TRUE(digests_equal(d, hmac_sha256("token", bytes_of("nonce"))));
  EXPECT_FALSE(digests_equal(d, hmac_sha256("tokem", bytes_of("nonce"))));
  EXPECT_FALSE(digests_equal(d, hmac_sha256("token", bytes_of("nonc"))));
}

#if defined(COHORT_TEST_HAVE_OPENSSL)
// Every length from 0 to 300 bytes (the padding's edges at 55, 56 and 64
// among them) and keys around the block size, against OpenSSL.
TEST(HmacSha256, AgreesWithOpenSslAtEveryLengthAcrossTheBlockEdges) {
  std::mt19937 random(42);
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t n = 0; n <= 300; ++n) {
    std::vector<uint8_t> data(n);
    for (auto& b : data) b = static_cast<uint8_t>(byte(random));
    for (size_t key_bytes : {size_t{0}, size_t{1}, size_t{32}, size_t{63}, size_t{64}, size_t{65}, size_t{200}}) {
      std::string key(key_bytes, '\0');
      for (auto& c : key) c = static_cast<char>(byte(random));
      Digest expected{};
      unsigned int len = 0;
      ASSERT_NE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(),
                     expected.data(), &len),
                nullptr);
      ASSERT_EQ(hex(hmac_sha256(key, data)), hex(expected)) << n << " bytes under a key of " << key_bytes;
    }
    Digest expected{};
    unsigned int len = 0;
    ASSERT_EQ(EVP_Digest(data.data(), data.size(), expected.data(), &len, EVP_sha256(), nullptr), 1);
    ASSERT_EQ(hex(sha256(data.data(), data.size())), hex(expected)) << n << " bytes";
  }
}
#endif

}  // namespace
}  // namespace cohort
