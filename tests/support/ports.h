// ports.h: a TCP port for a test's server, picked so that tests that ctest
// runs at once do not get the same one.
#pragma once

#include <cstdint>

#include "common/socket.h"

namespace cohort::testing {

// free_port picks a port that can be bound now, at random below the
// kernel's ephemeral range (port_to_bind_later). An ephemeral port (bind to
// 0, then close) was handed to two tests that ctest ran at once, and both
// jobs' stores failed on "Address already in use"; ports the kernel hands
// out to others are not drawn here, and two draws rarely meet.
inline uint16_t free_port() {
  return port_to_bind_later();
}

}  // namespace cohort::testing
