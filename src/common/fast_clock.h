// fast_clock.h: steady_clock's time at less than half its cost.
//
// The flight recorder's stall checks and dumps read the clock often.
// Through the vDSO a read costs ~25 ns here. Where the kernel
// itself keeps time with the CPU's time-stamp counter (clocksource "tsc":
// invariant, and checked by the kernel to agree across cores), fast_now()
// reads the counter (~10 ns) and converts it with a rate measured against
// steady_clock; everywhere else, and for the first 10 ms of the process
// while the rate is measured, it is steady_clock::now().
//
// The two clocks agree to within about a microsecond: the conversion is
// re-anchored on steady_clock every 10 ms, with the rate measured over the
// last 10 ms (steady_clock follows NTP's corrections). A re-anchoring may
// move the time back by that much, so fast_now() is monotonic only between
// re-anchorings; callers that take differences clamp them (the flight
// recorder does).
//
// Times that are only stored, to be read later, cost less still as bare
// counter readings: read_counter() is the time-stamp counter and nothing
// else, and a CounterScale converts readings to steady time when they are
// read (the flight recorder's dumps). On the path of a 4-byte all_reduce,
// ~0.15 us at 2 ranks, converting at once cost ~20 ns per read, and even a
// test of a flag next to the bare read cost ~15 ns (measured 2026-11-25,
// AMD EPYC): so there is no test at all.
#pragma once

#include <chrono>
#include <cstdint>

namespace cohort {

// fast_now returns the current time on std::chrono::steady_clock's scale.
std::chrono::steady_clock::time_point fast_now();

// read_counter returns the time-stamp counter (x86), or steady_clock's
// nanoseconds elsewhere; never 0.
inline uint64_t read_counter() {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

// CounterScale converts this process's read_counter() readings to steady
// time, at the rate of the counter between the process's start and the
// scale's making (now()), anchored at the latter: readings from the last
// minute are within a millisecond, recent ones within microseconds. Where
// the kernel does not keep time with the counter (fast_clock_uses_tsc()
// false on x86), a reading taken before a jump of the counter (a virtual
// machine's migration) is off by that jump.
class CounterScale {
 public:
  static CounterScale now();
  // steady_ns returns the reading's time in nanoseconds on steady_clock's
  // scale; 0 for 0 (a time not yet taken).
  int64_t steady_ns(uint64_t reading) const;

 private:
  uint64_t anchor_counter_ = 0;
  int64_t anchor_ns_ = 0;
  uint64_t rate_ = 0;  // nanoseconds per counter tick, 32.32 fixed point; 0: readings are nanoseconds
};

// reading_steady_ns returns a recent read_counter() reading's time in
// nanoseconds on steady_clock's scale, through fast_now()'s conversion
// (~10 ns) when the reading lies within a second of its anchor (off by a
// microsecond at most), else through a CounterScale made now (~0.25 us:
// it reads five pairs of clocks to keep the tightest). For a value looked
// at per call (a blocking collective's deadline, Deadline::when()), not
// for a dump's many old readings, which want one CounterScale for all.
int64_t reading_steady_ns(uint64_t reading);

// fast_clock_uses_tsc says whether fast_now() reads the time-stamp counter
// yet (false where the kernel does not use it, and during calibration).
bool fast_clock_uses_tsc();

}  // namespace cohort
