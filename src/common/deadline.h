// deadline.h: points in time by which a blocking call must return.
//
// Every blocking call in cohort takes a Deadline rather than a duration, so
// that a call made of several waits (connect, then send, then receive) is
// bounded as a whole.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "common/fast_clock.h"

namespace cohort {

using Clock = std::chrono::steady_clock;

// Deadline is a point on the steady clock, or never.
class Deadline {
 public:
  // after returns a deadline `timeout` from now; a zero timeout means never
  // (torch's kNoTimeout).
  static Deadline after(std::chrono::milliseconds timeout) { return after(timeout, Clock::now()); }
  // after, counting from `now` (a caller that has just read the clock).
  static Deadline after(std::chrono::milliseconds timeout, Clock::time_point now) {
    if (timeout.count() <= 0) return never();
    return Deadline(now + timeout);
  }
  // after_reading counts `timeout` from `start`, a read_counter() reading
  // (fast_clock.h), converted only when the deadline is looked at: a call
  // that never has to wait never pays for the conversion, ~20 ns of a
  // ~150 ns 4-byte all_reduce on shared memory.
  static Deadline after_reading(std::chrono::milliseconds timeout, uint64_t start) {
    if (timeout.count() <= 0) return never();
    Deadline d(Clock::time_point::max());
    d.start_reading_ = start;
    d.timeout_ = timeout;
    return d;
  }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  static Deadline at(Clock::time_point t) { return Deadline(t); }

  // resolved returns the same deadline as a point in time: for a caller
  // that looks at it again and again (each look at an after_reading one
  // converts its reading: reading_steady_ns, ~10 ns).
  Deadline resolved() const { return start_reading_ == 0 ? *this : Deadline(when()); }

  bool is_never() const { return start_reading_ == 0 && when_ == Clock::time_point::max(); }
  bool expired() const { return !is_never() && Clock::now() >= when(); }
  Clock::time_point when() const {
    if (start_reading_ == 0) return when_;
    return Clock::time_point(std::chrono::nanoseconds(reading_steady_ns(start_reading_))) + timeout_;
  }

  // remaining is the time left, at least zero; huge when never.
  std::chrono::milliseconds remaining() const {
    if (is_never()) return std::chrono::milliseconds(std::chrono::hours(24 * 365));
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when() - Clock::now());
    return std::max(left, std::chrono::milliseconds(0));
  }

  // as_timeout is this deadline as a duration, for a call that takes one
  // and reads zero as "never" (Store::wait, Deadline::after): zero when
  // never, else the time left but at least 1 ms, so that a deadline about
  // to pass never turns into "wait forever".
  std::chrono::milliseconds as_timeout() const {
    if (is_never()) return std::chrono::milliseconds(0);
    return std::max(remaining(), std::chrono::milliseconds(1));
  }
  // slice is as_timeout, at most `longest`: a wait that wakes now and then
  // to look at something else.
  std::chrono::milliseconds slice(std::chrono::milliseconds longest) const {
    return is_never() ? longest : std::min(as_timeout(), longest);
  }

  // poll_timeout_ms is remaining() for poll(2): -1 when never, rounded up so
  // that a wait does not return just before the deadline.
  int poll_timeout_ms() const {
    if (is_never()) return -1;
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(when() - Clock::now());
    if (left.count() <= 0) return 0;
    auto ms = (left.count() + 999) / 1000;
    return static_cast<int>(std::min<long long>(ms, 1 << 30));
  }

  // sooner returns the earlier of two deadlines.
  static Deadline sooner(Deadline a, Deadline b) { return a.when() < b.when() ? a : b; }

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
  uint64_t start_reading_ = 0;  // after_reading's start; 0: when_ holds the time
  std::chrono::milliseconds timeout_{0};
};

}  // namespace cohort
