// spin.h: deciding whether a thread may busy-poll instead of sleeping.
//
// A sleeping thread takes 25-50 µs to wake on these machines, longer than a
// loopback round trip, so waits poll without sleeping for a few tens of
// microseconds first. But a thousand threads spinning on two cores starve
// the very threads they wait for, so at most half the cores' worth of
// threads of a process spin at once; the others sleep straight away.
#pragma once

#include <algorithm>
#include <atomic>
#include <thread>

namespace cohort {

// SpinPermit is held for the length of one wait; granted() says whether
// this thread may spin during it.
class SpinPermit {
 public:
  SpinPermit() {
    static const int limit = std::max(1u, std::thread::hardware_concurrency() / 2);
    granted_ = spinners().fetch_add(1, std::memory_order_acq_rel) < limit;
    if (!granted_) spinners().fetch_sub(1, std::memory_order_acq_rel);
  }
  ~SpinPermit() {
    if (granted_) spinners().fetch_sub(1, std::memory_order_acq_rel);
  }
  SpinPermit(const SpinPermit&) = delete;
  SpinPermit& operator=(const SpinPermit&) = delete;
  bool granted() const { return granted_; }

 private:
  // The process-wide count of spinning threads: shared by design.
  static std::atomic<int>& spinners() {
    static std::atomic<int> count{0};
    return count;
  }
  bool granted_ = false;
};

}  // namespace cohort
