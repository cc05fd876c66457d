// deadline.h: points in time by which a blocking call must return.
//
// Every blocking call in cohort takes a Deadline rather than a duration, so
// that a call made of several waits (connect, then send, then receive) is
// bounded as a whole.
#pragma once

#include <algorithm>
#include <chrono>

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
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  static Deadline at(Clock::time_point t) { return Deadline(t); }

  bool is_never() const { return when_ == Clock::time_point::max(); }
  bool expired() const { return !is_never() && Clock::now() >= when_; }
  Clock::time_point when() const { return when_; }

  // remaining is the time left, at least zero; huge when never.
  std::chrono::milliseconds remaining() const {
    if (is_never()) return std::chrono::milliseconds(std::chrono::hours(24 * 365));
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when_ - Clock::now());
    return std::max(left, std::chrono::milliseconds(0));
  }

  // poll_timeout_ms is remaining() for poll(2): -1 when never, rounded up so
  // that a wait does not return just before the deadline.
  int poll_timeout_ms() const {
    if (is_never()) return -1;
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(when_ - Clock::now());
    if (left.count() <= 0) return 0;
    auto ms = (left.count() + 999) / 1000;
    return static_cast<int>(std::min<long long>(ms, 1 << 30));
  }

  // sooner returns the earlier of two deadlines.
  static Deadline sooner(Deadline a, Deadline b) { return a.when_ < b.when_ ? a : b; }

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
};

}  // namespace cohort
