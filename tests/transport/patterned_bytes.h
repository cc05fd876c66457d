// What the transport tests share: a deadline that no healthy test reaches,
// and message bytes that show a byte out of place.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "common/deadline.h"

namespace cohort::testing {

inline Deadline generous() {
  return Deadline::after(std::chrono::milliseconds(10000));
}

// pattern is `bytes` bytes that differ from message to message (`seed`)
// and along the message, so that a byte out of place shows.
inline std::vector<uint8_t> pattern(size_t bytes, size_t seed) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(seed * 131 + i * 7 + (i >> 8));
  return v;
}

}  // namespace cohort::testing
