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
#include <chrono>
#include <thread>

#include "common/deadline.h"

namespace cohort {

// cpu_relax tells the core this thread is in a spin loop (x86's pause: the
// sibling hyperthread gets the pipeline, and leaving the loop does not flush
// it); elsewhere it does nothing.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

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

// QuietSpell is the one waiting policy of a thread that waits for a peer
// (the transport engine's loop, Arena::wait_for): after the last sign of
// life, spin bare for the first quarter of `budget` (when the caller's
// ranks each have a core: the peer runs on another one, and a yield, a
// system call, costs more than a small message's trip), then spin but
// yield the core on every look (the peer may be waiting for one), then
// sleep. restart() starts the spell over; the caller reads the clock.
class QuietSpell {
 public:
  enum class Phase { kBareSpin, kYieldingSpin, kSleep };

  QuietSpell(std::chrono::microseconds budget, bool may_spin_bare)
      : budget_(budget), may_spin_bare_(may_spin_bare) {}

  void restart(Clock::time_point now) {
    bare_until_ = may_spin_bare_ ? now + budget_ / 4 : now;
    spin_until_ = now + budget_;
  }
  Phase phase(Clock::time_point now) const {
    if (now < bare_until_) return Phase::kBareSpin;
    return now < spin_until_ ? Phase::kYieldingSpin : Phase::kSleep;
  }

 private:
  std::chrono::microseconds budget_;
  bool may_spin_bare_;
  Clock::time_point bare_until_{};
  Clock::time_point spin_until_{};
};

}  // namespace cohort
