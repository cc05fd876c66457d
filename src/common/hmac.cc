#include "common/hmac.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "cohort/errors.h"

namespace cohort {

Digest hmac_sha256(const std::string& key, const std::vector<uint8_t>& data) {
  Digest out{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), out.data(),
            &len) ||
      len != out.size()) {
    throw Error("HMAC-SHA256 failed in OpenSSL");
  }
  return out;
}

// The comparison and the nonces need no OpenSSL: every rank draws a nonce
// when it claims its seat, with or without a token, and OpenSSL's first
// random bytes set up its generator and providers (here about a
// millisecond of CPU a process, 8% of a 128-rank job's time to its first
// barrier). Only HMAC, with a token, uses it.

bool digests_equal(const Digest& a, const Digest& b) {
  // Every byte is looked at whatever the first difference.
  uint8_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ |= static_cast<uint8_t>(a[i] ^ b[i]);
  volatile uint8_t seen = differ;  // kept from being turned into an early exit
  return seen == 0;
}

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
