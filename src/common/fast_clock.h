// fast_clock.h: steady_clock's time at less than half its cost.
//
// A blocking collective reads the clock twice (its deadline and the flight
// recorder's start, then its end). Through the vDSO a read costs ~25 ns
// here, a tenth of a small all_reduce over shared memory. Where the kernel
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
#pragma once

#include <chrono>

namespace cohort {

// fast_now returns the current time on std::chrono::steady_clock's scale.
std::chrono::steady_clock::time_point fast_now();

// fast_clock_uses_tsc says whether fast_now() reads the time-stamp counter
// yet (false where the kernel does not use it, and during calibration).
bool fast_clock_uses_tsc();

}  // namespace cohort
