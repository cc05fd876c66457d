#include "common/hmac.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cohort/errors.h"

namespace cohort {
namespace {

// SHA-256 as FIPS 180-4 defines it (section 6.2), for HMAC below. cohort
// carries its own rather than linking OpenSSL's libcrypto for this one
// function: every process that linked it loaded and relocated 4.5 MB of
// library at start (17 thousand relocations; 0.9 ms a process here, about
// 120 ms of CPU for a 128-rank job on one host), whether or not it ever
// used a token. Checked against the FIPS and RFC 4231 vectors and against
// OpenSSL (tests/common/hmac_test.cc).

// The first 32 bits of the fractional parts of the cube roots of the first
// 64 primes (FIPS 180-4, 4.2.2).
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr size_t kBlock = 64;

uint32_t rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

class Sha256 {
 public:
  void add(const uint8_t* data, size_t n) {
    total_ += n;
    while (n > 0) {
      const size_t take = std::min(n, kBlock - filled_);
      std::memcpy(block_ + filled_, data, take);
      filled_ += take, data += take, n -= take;
      if (filled_ == kBlock) compress(), filled_ = 0;
    }
  }

  // finish pads (a 1 bit, zeros, the length in bits, big-endian) and
  // returns the digest; the object is spent.
  Digest finish() {
    const uint64_t bits = total_ * 8;
    const uint8_t one = 0x80, zero = 0;
    add(&one, 1);
    while (filled_ != kBlock - 8) add(&zero, 1);
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    add(length, 8);
    Digest out{};
    for (int i = 0; i < 8; ++i) {
      for (int b = 0; b < 4; ++b) out[static_cast<size_t>(4 * i + b)] = static_cast<uint8_t>(h_[i] >> (24 - 8 * b));
    }
    return out;
  }

 private:
  void compress() {
    uint32_t w[64];
    for (int t = 0; t < 16; ++t) {
      w[t] = uint32_t{block_[4 * t]} << 24 | uint32_t{block_[4 * t + 1]} << 16 | uint32_t{block_[4 * t + 2]} << 8 |
             uint32_t{block_[4 * t + 3]};
    }
    for (int t = 16; t < 64; ++t) {
      const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int t = 0; t < 64; ++t) {
      const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[t] + w[t];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
  }

  // The first 32 bits of the fractional parts of the square roots of the
  // first 8 primes (FIPS 180-4, 5.3.3).
  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block_[kBlock] = {};
  size_t filled_ = 0;
  uint64_t total_ = 0;
};

}  // namespace

Digest sha256(const uint8_t* data, size_t n) {
  Sha256 s;
  s.add(data, n);
  return s.finish();
}

// HMAC as RFC 2104 defines it: H((K ^ opad) || H((K ^ ipad) || data)),
// with a key longer than a block hashed first.
Digest hmac_sha256(const std::string& key, const std::vector<uint8_t>& data) {
  uint8_t k[kBlock] = {};
  if (key.size() > kBlock) {
    const Digest hashed = sha256(reinterpret_cast<const uint8_t*>(key.data()), key.size());
    std::memcpy(k, hashed.data(), hashed.size());
  } else {
    std::memcpy(k, key.data(), key.size());
  }
  uint8_t pad[kBlock];
  for (size_t i = 0; i < kBlock; ++i) pad[i] = k[i] ^ 0x36;
  Sha256 inner;
  inner.add(pad, kBlock);
  inner.add(data.data(), data.size());
  const Digest inside = inner.finish();
  for (size_t i = 0; i < kBlock; ++i) pad[i] = k[i] ^ 0x5c;
  Sha256 outer;
  outer.add(pad, kBlock);
  outer.add(inside.data(), inside.size());
  return outer.finish();
}

bool digests_equal(const Digest& a, const Digest& b) {
  // Every byte is looked at whatever the first difference.
  uint8_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ |= static_cast<uint8_t>(a[i] ^ b[i]);
  volatile uint8_t seen = differ;  // kept from being turned into an early exit
  return seen == 0;
}

// Nonces come from the kernel: every rank draws one when it claims its
// seat, with or without a token.
Digest random_nonce() {
  Digest out{};
  size_t got = 0;
  while (got < out.size()) {
    // getrandom(2) from the kernel's secure generator: it blocks only
    // before that is seeded, at boot.
    const ssize_t n = ::getrandom(out.data() + got, out.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(std::string("the kernel could not produce random bytes for an authentication nonce: ") +
                  std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace cohort
