// spin_lock.h: a lock for critical sections of a few dozen nanoseconds that
// are almost never contended.
//
// The flight recorder updates its ring under a lock on every operation, on
// the path of a 4-byte all_reduce that takes ~0.5 µs in all; a
// std::mutex pair costs ~25 ns there (two library calls and a futex check),
// this one an exchange and a store. A waiter yields the core after a short
// spin, so a holder that was preempted (ranks outnumbering cores) gets to
// run, and a long holder (a dump copying the ring) costs waiters CPU, never
// correctness.
#pragma once

#include <atomic>
#include <thread>

namespace cohort {

// SpinLock meets BasicLockable: use it with std::lock_guard.
class SpinLock {
 public:
  void lock() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      // Wait on a plain load (no cache-line ping-pong), yielding once the
      // holder has had ~100 polls' time.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 100) std::this_thread::yield();
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace cohort
