// ports.h: a TCP port for a test's server, picked so that tests that ctest
// runs at once do not get the same one.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <random>

#include "common/socket.h"

namespace cohort::testing {

// free_port picks a port that can be bound now, at random below the
// kernel's ephemeral range (32768-60999 here). An ephemeral port (bind to
// 0, then close) was handed to two tests that ctest ran at once, and both
// jobs' stores failed on "Address already in use"; ports the kernel hands
// out to others are not drawn here, and two draws rarely meet.
inline uint16_t free_port() {
  static std::mt19937 random(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<uint16_t>(20000 + random() % 12000);
    if (listen_tcp("", port).ok()) return port;
  }
  auto s = listen_tcp("", 0);
  return local_port(s.value().fd());
}

}  // namespace cohort::testing
