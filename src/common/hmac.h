// hmac.h: the few cryptographic primitives authentication needs: SHA-256
// and HMAC (hmac.cc's own, from FIPS 180-4 and RFC 2104), nonces from the
// kernel.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cohort {

using Digest = std::array<uint8_t, 32>;

// sha256 returns the SHA-256 digest of `n` bytes at `data`.
Digest sha256(const uint8_t* data, size_t n);

// hmac_sha256 returns HMAC-SHA256 of `data` under `key`.
Digest hmac_sha256(const std::string& key, const std::vector<uint8_t>& data);

// digests_equal compares in constant time, so timing tells nothing.
bool digests_equal(const Digest& a, const Digest& b);

// random_nonce returns 32 bytes from the system's secure generator.
Digest random_nonce();

}  // namespace cohort
