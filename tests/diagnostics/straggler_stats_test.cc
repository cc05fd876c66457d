// StragglerStats (who the ranks waited for, from their times in the same
// collectives), the recorder's newest(), and the metrics endpoint's text.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "diagnostics/flight_recorder.h"
#include "diagnostics/metrics_server.h"
#include "diagnostics/straggler_stats.h"

namespace cohort {
namespace {

constexpr int64_t kMs = 1000000;

TEST(StragglerStats, TheRankWithTheLeastTimeInsideWasLastAndTheOthersWaitedTheDifference) {
  StragglerStats stats(3);
  // Rank 1 arrived 20 ms after rank 0 and 15 ms after rank 2; the work took 1 ms.
  stats.add({21 * kMs, 1 * kMs, 16 * kMs}, "all_reduce", 4096);
  EXPECT_EQ(stats.collectives(), 1u);
  const StragglerStats::RankView late = stats.rank(1);
  EXPECT_EQ(late.times_last, 1u);
  EXPECT_DOUBLE_EQ(late.waited_for_s, 0.035);
  EXPECT_DOUBLE_EQ(late.lateness_p50_s, 0.020);
  EXPECT_DOUBLE_EQ(late.wait_s, 0);
  EXPECT_DOUBLE_EQ(stats.rank(0).wait_s, 0.020);
  EXPECT_EQ(stats.rank(0).last_waited_for, 1);
  EXPECT_EQ(stats.rank(1).last_waited_for, -1);
  EXPECT_EQ(stats.ranking().front().rank, 1);
  EXPECT_EQ(stats.straggler(), 1);
  // The bus bandwidth is timed by the last rank: 2 (n-1)/n x 4096 B in 1 ms.
  ASSERT_EQ(stats.ops().size(), 1u);
  EXPECT_EQ(stats.ops()[0].size_class, 4096u);
  EXPECT_NEAR(stats.ops()[0].busbw_gbs, 4096 * 4.0 / 3 / 1e6, 1e-9);
}

TEST(StragglerStats, RootedCollectivesAndOtherSizesAreNotCounted) {
  StragglerStats stats(2);
  stats.add({5 * kMs, 1 * kMs}, "broadcast", 4);
  stats.add({5 * kMs, 1 * kMs, 2 * kMs}, "all_reduce", 4);
  EXPECT_EQ(stats.collectives(), 0u);
  EXPECT_EQ(stats.straggler(), -1);
  EXPECT_TRUE(leaves_together("barrier"));
  EXPECT_FALSE(leaves_together("gather"));
}

// FSDP's all_gather_into_tensor and reduce_scatter_tensor, DDP's
// coalesced all_reduce and all_to_all_single are counted with their
// families, as the flight recorder names them.
TEST(StragglerStats, TheTensorAndCoalescedFormsCountWithTheirFamilies) {
  StragglerStats stats(2);
  stats.add({5 * kMs, 1 * kMs}, "all_gather_into_tensor", 4096);
  stats.add({5 * kMs, 1 * kMs}, "reduce_scatter_tensor", 4096);
  stats.add({5 * kMs, 1 * kMs}, "all_reduce_coalesced", 4096);
  stats.add({5 * kMs, 1 * kMs}, "all_to_all_single", 4096);
  stats.add({5 * kMs, 1 * kMs}, "send", 4096);
  EXPECT_EQ(stats.collectives(), 4u);
  EXPECT_EQ(stats.rank(1).times_last, 4u);
  std::set<std::string> ops;
  for (const StragglerStats::OpView& o : stats.ops()) ops.insert(o.op);
  EXPECT_EQ(ops, (std::set<std::string>{"all_gather", "reduce_scatter", "all_reduce", "all_to_all"}));
  EXPECT_TRUE(leaves_together("all_gather_into_tensor"));
  EXPECT_FALSE(leaves_together("recv"));
}

TEST(StragglerStats, BeingLastByLessThanAMillisecondOrHalfTheTimeNamesNobody) {
  StragglerStats noise(2);
  for (int i = 0; i < 100; ++i) noise.add({kMs / 2, 10}, "all_reduce", 4);  // always rank 1, by 0.5 ms
  EXPECT_EQ(noise.rank(1).times_last, 100u);
  EXPECT_EQ(noise.straggler(), -1);
  StragglerStats shared(3);
  for (int i = 0; i < 90; ++i) {
    std::vector<int64_t> t(3, 30 * kMs);
    t[static_cast<size_t>(i % 3)] = kMs;  // each rank last a third of the time
    shared.add(t, "all_gather", 64);
  }
  EXPECT_EQ(shared.straggler(), -1);
  shared.add({kMs, 30 * kMs, 30 * kMs}, "all_gather", 64);
  EXPECT_EQ(shared.straggler(), -1);  // 31 of 91 is not half
}

TEST(StragglerStats, PercentilesComeFromTheNewestLatenesses) {
  StragglerStats stats(2);
  for (int i = 1; i <= 10; ++i) stats.add({(i + 1) * kMs, kMs}, "all_reduce", 4);  // late by i ms
  const StragglerStats::RankView v = stats.rank(1);
  EXPECT_DOUBLE_EQ(v.lateness_p50_s, 0.005);
  EXPECT_DOUBLE_EQ(v.lateness_p90_s, 0.010);
  EXPECT_DOUBLE_EQ(v.lateness_max_s, 0.010);
  for (size_t i = 0; i < StragglerStats::kRecentLateness; ++i) stats.add({3 * kMs, kMs}, "all_reduce", 4);
  EXPECT_DOUBLE_EQ(stats.rank(1).lateness_max_s, 0.002);  // the old ones left the window
  const Json j = stats.to_json({"a", "b"});
  EXPECT_EQ(j["straggler"].as_int(), 1);
  EXPECT_EQ(j["ranks"].items()[0]["host"].as_string(), "b");
}

TEST(FlightRecorderNewest, CopiesTheEntriesAfterAnIdAtMostMaxAndOnlyWhatTheRingHolds) {
  FlightRecorder r(8);
  float x = 1;
  for (uint64_t s = 1; s <= 12; ++s)
    r.finished(r.began("all_reduce", shape_of(Buffer::of(&x, 1)), s), nullptr);
  uint64_t last = 0;
  std::vector<TraceEntry> all = r.newest(0, 100, &last);
  EXPECT_EQ(last, 12u);
  ASSERT_EQ(all.size(), 8u);  // ids 5..12: the ring's capacity
  EXPECT_EQ(all.front().sequence, 5u);
  EXPECT_EQ(all.back().sequence, 12u);
  EXPECT_EQ(all.back().state, OpState::kCompleted);
  EXPECT_EQ(std::string(all.back().op), "all_reduce");
  EXPECT_EQ(r.newest(10, 100).size(), 2u);
  EXPECT_EQ(r.newest(0, 3).front().sequence, 10u);
  EXPECT_TRUE(r.newest(12, 100).empty());
  FlightRecorder none(0);
  EXPECT_TRUE(none.newest(0, 10, &last).empty());
}

TEST(MetricsText, WritesEachFamilyOnceWithItsTypeAndEscapesLabels) {
  StragglerStats stats(2);
  stats.add({25 * kMs, kMs}, "all_reduce", 4);
  Json summary = stats.to_json({"h0", "h1"});
  Json report = Json::object();
  report.set("rank", 0);
  report.set("collectives", 7);
  report.set("busy_s", 0.5);
  report.set("steps_per_s", 3.0);
  report.set("summary", summary);
  Json bare = report;
  bare.set("summary", Json());
  const std::string text = metrics_text({{"a\"b", report}, {"other", bare}});
  EXPECT_NE(text.find("# TYPE cohort_collectives_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("cohort_collectives_total{group=\"a\\\"b\",rank=\"0\"} 7\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("cohort_collectives_total{group=\"other\",rank=\"0\"} 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("cohort_straggler_waited_for_seconds_total{group=\"a\\\"b\",rank=\"1\"} 0.024\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("cohort_straggler_lateness_seconds{group=\"a\\\"b\",rank=\"1\",quantile=\"0.5\"} 0.024\n"),
      std::string::npos)
      << text;
  size_t types = 0;
  for (size_t at = text.find("# TYPE cohort_collectives_total"); at != std::string::npos;
       at = text.find("# TYPE cohort_collectives_total", at + 1)) {
    ++types;
  }
  EXPECT_EQ(types, 1u);
  EXPECT_EQ(metrics_text({}), "");
}

}  // namespace
}  // namespace cohort
