#include "common/hmac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

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

bool digests_equal(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Digest random_nonce() {
  Digest out{};
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) {
    throw Error("OpenSSL could not produce random bytes for an authentication nonce");
  }
  return out;
}

}  // namespace cohort
