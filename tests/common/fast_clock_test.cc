// fast_now() must agree with steady_clock, whether it reads the
// time-stamp counter (where the kernel uses it) or steady_clock itself; so
// must counter readings converted later.
#include "common/fast_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/deadline.h"

namespace cohort {
namespace {

using std::chrono::microseconds;
using std::chrono::steady_clock;

int64_t gap_us(steady_clock::time_point a, steady_clock::time_point b) {
  return std::chrono::duration_cast<microseconds>(a - b).count();
}

TEST(FastClockTest, AgreesWithSteadyClockBeforeAndAfterCalibration) {
  // Before the rate is known it is steady_clock itself; 10 ms later it may
  // read the counter. Either way it stays within 50 us of steady_clock
  // (the bound is loose for a loaded machine; the real error is below 1 us).
  for (int round = 0; round < 40; ++round) {
    const auto before = steady_clock::now();
    const auto fast = fast_now();
    const auto after = steady_clock::now();
    EXPECT_GE(gap_us(fast, before), -50) << "round " << round;
    EXPECT_LE(gap_us(fast, after), 50) << "round " << round;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST(FastClockTest, MeasuresAnIntervalLikeSteadyClock) {
  // Each fast reading is bracketed by steady ones, so a preemption between
  // the two clocks' reads (a loaded machine, a sanitizer build) widens the
  // allowed range instead of failing the test: the fast interval must lie
  // within the bracket's shortest and longest steady intervals, 100 us of
  // slack either side.
  fast_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(15));  // past the calibration
  const auto before0 = steady_clock::now();
  const auto fast0 = fast_now();
  const auto after0 = steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const auto before1 = steady_clock::now();
  const auto fast1 = fast_now();
  const auto after1 = steady_clock::now();
  const int64_t fast_us = gap_us(fast1, fast0);
  EXPECT_GE(fast_us, 30000);
  EXPECT_GE(fast_us, gap_us(before1, after0) - 100) << "fast " << fast_us << " us";
  EXPECT_LE(fast_us, gap_us(after1, before0) + 100) << "fast " << fast_us << " us";
}

TEST(FastClockTest, StaysWithSteadyClockAcrossReanchoring) {
  // The conversion is re-anchored every second; run through one.
  const auto end = steady_clock::now() + std::chrono::milliseconds(1300);
  while (steady_clock::now() < end) {
    const auto before = steady_clock::now();
    const auto fast = fast_now();
    const auto after = steady_clock::now();
    ASSERT_GE(gap_us(fast, before), -50);
    ASSERT_LE(gap_us(fast, after), 50);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

int64_t steady_ns_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

TEST(FastClockTest, CounterReadingsConvertToTheSteadyTimeTheyWereTakenAt) {
  // A reading converted at once, and one converted 30 ms after it was
  // taken, fall between steady_clock's readings around it (50 us of slack,
  // for a loaded machine).
  const int64_t before = steady_ns_now();
  const uint64_t reading = read_counter();
  const int64_t after = steady_ns_now();
  ASSERT_NE(reading, 0u);
  const int64_t at_once = CounterScale::now().steady_ns(reading);
  EXPECT_GE(at_once, before - 50'000);
  EXPECT_LE(at_once, after + 50'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const int64_t later = CounterScale::now().steady_ns(reading);
  EXPECT_GE(later, before - 50'000);
  EXPECT_LE(later, after + 50'000);
  EXPECT_EQ(CounterScale::now().steady_ns(0), 0) << "0 is a time not yet taken";
}

TEST(FastClockTest, TwoCounterReadingsMeasureAnIntervalLikeSteadyClock) {
  // Bracketed as above: a preemption between the reads widens the range.
  const int64_t before0 = steady_ns_now();
  const uint64_t reading0 = read_counter();
  const int64_t after0 = steady_ns_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int64_t before1 = steady_ns_now();
  const uint64_t reading1 = read_counter();
  const int64_t after1 = steady_ns_now();
  const CounterScale scale = CounterScale::now();
  const int64_t counter_us = (scale.steady_ns(reading1) - scale.steady_ns(reading0)) / 1000;
  EXPECT_GE(counter_us, 20000);
  EXPECT_GE(counter_us, (before1 - after0) / 1000 - 100) << "counter " << counter_us << " us";
  EXPECT_LE(counter_us, (after1 - before0) / 1000 + 100) << "counter " << counter_us << " us";
}

TEST(FastClockTest, ARecentReadingAndAnOldOneConvertToTheSteadyTimeTheyWereTakenAt) {
  // reading_steady_ns converts a reading near the conversion's anchor
  // through fast_now()'s rate, and one over a second from it through a
  // CounterScale: both must land between the steady readings around them.
  fast_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(15));
  fast_now();  // past the calibration
  const int64_t old_before = steady_ns_now();
  const uint64_t old_reading = read_counter();
  const int64_t old_after = steady_ns_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  fast_now();  // re-anchors: the old reading is now over a second before the anchor
  const int64_t before = steady_ns_now();
  const uint64_t reading = read_counter();
  const int64_t after = steady_ns_now();
  const int64_t recent = reading_steady_ns(reading);
  EXPECT_GE(recent, before - 50'000);
  EXPECT_LE(recent, after + 50'000);
  const int64_t old = reading_steady_ns(old_reading);
  EXPECT_GE(old, old_before - 50'000);
  EXPECT_LE(old, old_after + 50'000);
}

TEST(DeadlineTest, ADeadlineFromACounterReadingFallsTheTimeoutAfterTheReading) {
  const auto before = steady_clock::now();
  const Deadline d = Deadline::after_reading(std::chrono::milliseconds(100), read_counter());
  const auto after = steady_clock::now();
  EXPECT_FALSE(d.is_never());
  EXPECT_GE(gap_us(d.when(), before), 100000 - 50);
  EXPECT_LE(gap_us(d.when(), after), 100000 + 50);
  EXPECT_FALSE(d.expired());
  const Deadline sooner = Deadline::at(after + std::chrono::milliseconds(50));
  EXPECT_EQ(Deadline::sooner(d, sooner).when(), sooner.when());
  EXPECT_EQ(Deadline::sooner(sooner, d).when(), sooner.when());
  std::this_thread::sleep_until(after + std::chrono::milliseconds(101));
  EXPECT_TRUE(d.expired());
  EXPECT_EQ(d.poll_timeout_ms(), 0);
  EXPECT_TRUE(Deadline::after_reading(std::chrono::milliseconds(0), read_counter()).is_never());
}

TEST(FastClockTest, ReadsTheCounterWhereTheKernelDoes) {
  fast_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(15));
  fast_now();  // finishes the calibration
  FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  char source[32] = {};
  if (f) {
    if (std::fscanf(f, "%31s", source) != 1) source[0] = '\0';
    std::fclose(f);
  }
#if defined(__x86_64__)
  EXPECT_EQ(fast_clock_uses_tsc(), std::string(source) == "tsc") << "clocksource " << source;
#else
  EXPECT_FALSE(fast_clock_uses_tsc());
#endif
}

}  // namespace
}  // namespace cohort
