#include "common/fast_clock.h"

#include <atomic>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace cohort {
namespace {

using Steady = std::chrono::steady_clock;
// 64x64-bit products for the fixed-point conversion (GCC and Clang).
__extension__ typedef unsigned __int128 Wide;
__extension__ typedef __int128 SignedWide;

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch()).count();
}

#if defined(__x86_64__)

// Pair is the counter and steady time read together: steady_clock is read
// between two counter reads, and the counter's midpoint kept; `spread`
// (ticks between the two) is large if the thread was preempted meanwhile.
struct Pair {
  uint64_t counter;
  int64_t ns;
  uint64_t spread;
};
Pair read_pair() {
  const uint64_t before = __rdtsc();
  const int64_t ns = steady_ns();
  const uint64_t after = __rdtsc();
  return Pair{before + (after - before) / 2, ns, after - before};
}

// read_tightest_pair reads a few pairs and keeps the one read fastest: a
// preemption inside a single read_pair() puts its steady time anywhere in
// the gap, so a CounterScale anchored on it would be off by up to half the
// gap for every reading it converts (found by a test under TSan, 130 us).
// Only for the rare callers (CounterScale, the origin); ~0.2 us.
Pair read_tightest_pair() {
  Pair best = read_pair();
  for (int tries = 0; tries < 4; ++tries) {
    const Pair next = read_pair();
    if (next.spread < best.spread) best = next;
  }
  return best;
}

// The rate is measured over the last 10 ms and the conversion re-anchored
// that often: steady_clock follows NTP's frequency corrections (here the
// counter and steady_clock drifted apart by ~1e-4 of the time, measured
// over half a second), so a rate kept for long goes stale. 10 ms at 1e-4
// is a microsecond; the slow path that re-anchors costs ~50 ns, 100 times
// a second at most.
constexpr int64_t kCalibrationNs = 10'000'000;
constexpr int64_t kReanchorNs = 10'000'000;
constexpr uint64_t kCleanSampleNs = 2'000;  // steady_clock's read takes ~25 ns

// The conversion ns = anchor_ns + (tsc - anchor_tsc) * rate / 2^32, read
// under a sequence lock: `version` is odd while a writer changes it, and 0
// until the rate is known. Atomics throughout (relaxed inside the lock), so
// that readers on other threads race with nothing.
struct Conversion {
  std::atomic<uint64_t> version{0};
  std::atomic<uint64_t> anchor_tsc{0};
  std::atomic<int64_t> anchor_ns{0};
  std::atomic<uint64_t> rate{0};            // nanoseconds per tick, 32.32 fixed point
  std::atomic<uint64_t> reanchor_ticks{0};  // ticks after the anchor that call for a new one
};

// Written under writer_mu only: the last sample, from which the next rate
// is measured.
struct Origin {
  bool checked = false;
  bool usable = false;
  uint64_t tsc = 0;
  int64_t ns = 0;
};

Conversion g_conversion;
std::atomic<bool> g_steady_only{false};  // the kernel does not keep time with the counter
std::mutex g_writer_mu;
Origin g_origin;  // guarded by g_writer_mu

bool kernel_uses_tsc() {
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  return static_cast<bool>(f >> source) && source == "tsc";
}

// publish sets a new anchor at (tsc, ns) with the rate measured since the
// last one; g_writer_mu held.
void publish(uint64_t tsc, int64_t ns) {
  const uint64_t ticks = tsc - g_origin.tsc;
  const int64_t elapsed = ns - g_origin.ns;
  if (ticks == 0 || elapsed <= 0) return;
  const auto rate = static_cast<uint64_t>((static_cast<Wide>(elapsed) << 32) / ticks);
  if (rate == 0) return;
  const uint64_t v = g_conversion.version.load(std::memory_order_relaxed);
  const uint64_t writing = (v | 1) + (v & 1 ? 2 : 0);  // odd
  // No standalone fences (ThreadSanitizer does not model them): release
  // on each field keeps the odd version before it, acquire on each load in
  // fast_now() keeps the second version check after them.
  g_conversion.version.store(writing, std::memory_order_relaxed);
  g_conversion.anchor_tsc.store(tsc, std::memory_order_release);
  g_conversion.anchor_ns.store(ns, std::memory_order_release);
  g_conversion.rate.store(rate, std::memory_order_release);
  g_conversion.reanchor_ticks.store(static_cast<uint64_t>((static_cast<Wide>(kReanchorNs) << 32) / rate),
                                    std::memory_order_release);
  g_conversion.version.store(writing + 1, std::memory_order_release);
  g_origin.tsc = tsc;
  g_origin.ns = ns;
}

// slow_now is steady_clock's time; on the way it starts the calibration,
// finishes it, or re-anchors, whichever is due (one thread at a time; the
// others go on with the conversion they have).
Steady::time_point slow_now(bool due) {
  // A pair the thread was preempted in the middle of is not used as anchor.
  const Pair pair = read_pair();
  const uint64_t tsc = pair.counter;
  const int64_t ns = pair.ns;
  const uint64_t rate = g_conversion.rate.load(std::memory_order_relaxed);
  const bool clean = rate == 0 || ((static_cast<Wide>(pair.spread) * rate) >> 32) < kCleanSampleNs;
  std::unique_lock<std::mutex> lock(g_writer_mu, std::try_to_lock);
  if (lock.owns_lock() && clean) {
    if (!g_origin.checked) {
      g_origin.checked = true;
      g_origin.usable = kernel_uses_tsc();
      if (!g_origin.usable) g_steady_only.store(true, std::memory_order_relaxed);
      g_origin.tsc = tsc;
      g_origin.ns = ns;
    } else if (g_origin.usable && (due || ns - g_origin.ns >= kCalibrationNs)) {
      publish(tsc, ns);
    }
  }
  return Steady::time_point(std::chrono::nanoseconds(ns));
}

// Anchor is one consistent reading of g_conversion's fields.
struct Anchor {
  uint64_t tsc;
  int64_t ns;
  uint64_t rate;
  uint64_t reanchor_ticks;
};

// read_anchor reads the conversion under its sequence lock: false while
// there is none yet (calibrating, or the kernel does not keep time with
// the counter) or a writer changed it meanwhile.
inline bool read_anchor(Anchor* a) {
  const uint64_t v = g_conversion.version.load(std::memory_order_acquire);
  if (v == 0 || (v & 1)) return false;
  a->tsc = g_conversion.anchor_tsc.load(std::memory_order_acquire);
  a->ns = g_conversion.anchor_ns.load(std::memory_order_acquire);
  a->rate = g_conversion.rate.load(std::memory_order_acquire);
  a->reanchor_ticks = g_conversion.reanchor_ticks.load(std::memory_order_acquire);
  return g_conversion.version.load(std::memory_order_relaxed) == v;
}

#endif  // __x86_64__

// at_rate converts `ticks` of the counter from an anchor (negative:
// before it) to nanoseconds, at `rate` (32.32 fixed point).
int64_t at_rate(int64_t ticks, uint64_t rate) {
  return static_cast<int64_t>((static_cast<SignedWide>(ticks) * static_cast<SignedWide>(rate)) >> 32);
}

}  // namespace

std::chrono::steady_clock::time_point fast_now() {
#if defined(__x86_64__)
  Anchor a;
  if (!read_anchor(&a)) {
    if (g_steady_only.load(std::memory_order_relaxed)) return Steady::now();
    return slow_now(false);
  }
  const uint64_t tsc = __rdtsc();
  // A counter a hair behind the anchor (read on another core) counts as
  // the anchor itself.
  const uint64_t ticks = tsc > a.tsc ? tsc - a.tsc : 0;
  if (ticks > a.reanchor_ticks) return slow_now(true);
  const auto ns = a.ns + static_cast<int64_t>((static_cast<Wide>(ticks) * a.rate) >> 32);
  return Steady::time_point(std::chrono::nanoseconds(ns));
#else
  return std::chrono::steady_clock::now();
#endif
}

namespace {

// The process's first pair (counter, steady time), taken while the library
// loads: CounterScale measures the counter's rate from it.
struct CounterOrigin {
  uint64_t counter = 0;
  int64_t ns = 0;
  CounterOrigin() {
#if defined(__x86_64__)
    const Pair pair = read_tightest_pair();
    counter = pair.counter;
    ns = pair.ns;
#endif
  }
};
const CounterOrigin g_counter_origin;

}  // namespace

CounterScale CounterScale::now() {
  CounterScale scale;
#if defined(__x86_64__)
  const Pair pair = read_tightest_pair();
  const uint64_t ticks = pair.counter - g_counter_origin.counter;
  const int64_t elapsed = pair.ns - g_counter_origin.ns;
  scale.anchor_counter_ = pair.counter;
  scale.anchor_ns_ = pair.ns;
  // Made within the same microsecond as the origin (never in practice):
  // about 1 ns a tick, rather than a rate from nothing.
  scale.rate_ = ticks > 1000 && elapsed > 0
                    ? static_cast<uint64_t>((static_cast<Wide>(elapsed) << 32) / ticks)
                    : uint64_t{1} << 32;
#endif
  return scale;
}

int64_t CounterScale::steady_ns(uint64_t reading) const {
  if (reading == 0 || rate_ == 0) return static_cast<int64_t>(reading);
  return anchor_ns_ + at_rate(static_cast<int64_t>(reading - anchor_counter_), rate_);  // negative: older
}

int64_t reading_steady_ns(uint64_t reading) {
#if defined(__x86_64__)
  // Within a second (100 re-anchoring periods) of the anchor, the rate's
  // error (~1e-4 against steady_clock's corrections) costs at most 0.1 ms.
  Anchor a;
  if (read_anchor(&a)) {
    const auto since = static_cast<int64_t>(reading - a.tsc);  // negative: before the anchor
    const auto window = static_cast<int64_t>(a.reanchor_ticks * 100);
    if (since < window && since > -window) return a.ns + at_rate(since, a.rate);
  }
  return CounterScale::now().steady_ns(reading);
#else
  return static_cast<int64_t>(reading);
#endif
}

bool fast_clock_uses_tsc() {
#if defined(__x86_64__)
  return g_conversion.version.load(std::memory_order_acquire) != 0;
#else
  return false;
#endif
}

}  // namespace cohort
