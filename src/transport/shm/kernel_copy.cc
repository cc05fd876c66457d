#include "transport/shm/kernel_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace cohort::shm {
namespace {

using Clock = std::chrono::steady_clock;

double measure() {
  const size_t n = kKernelCopyProbeBytes;
  std::vector<unsigned char> from(n, 1), into(n, 2);  // touched: no page faults in the timing
  const pid_t self = ::getpid();
  double best_memcpy = 1e30, best_kernel = 1e30;
  for (int i = 0; i < 8; ++i) {
    auto t0 = Clock::now();
    std::memcpy(into.data(), from.data(), n);
    auto t1 = Clock::now();
    // Reading this process's own pages takes the same path (pin, copy,
    // unpin) as reading a peer's, without needing one.
    iovec local{into.data(), n};
    iovec remote{from.data(), n};
    const ssize_t got = ::process_vm_readv(self, &local, 1, &remote, 1, 0);
    auto t2 = Clock::now();
    if (got != static_cast<ssize_t>(n)) return 0;
    best_memcpy = std::min(best_memcpy, std::chrono::duration<double>(t1 - t0).count());
    best_kernel = std::min(best_kernel, std::chrono::duration<double>(t2 - t1).count());
    from[static_cast<size_t>(i)] ^= 1;  // keep the copies from being folded together
  }
  return best_kernel > 0 ? best_memcpy / best_kernel : 0;
}

}  // namespace

double kernel_copy_speed() {
  static const double speed = measure();
  return speed;
}

}  // namespace cohort::shm
