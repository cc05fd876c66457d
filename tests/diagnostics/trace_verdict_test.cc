// cohort-trace's analysis on hand-made dumps: the rank that never started
// the stuck collective, missing dumps, mismatched operations.
#include "diagnostics/trace_verdict.h"

#include <gtest/gtest.h>

namespace cohort::testing {
namespace {

TraceRecord collective(uint64_t sequence, const std::string& op, uint64_t count, OpState state,
                       const std::string& dtype = "float32") {
  TraceRecord r;
  r.id = sequence;
  r.op = op;
  r.sequence = sequence;
  r.state = state;
  r.input_count = r.output_count = count;
  r.dtype = dtype;
  r.enqueued_us = r.started_us = 1000000 * static_cast<int64_t>(sequence);
  if (state == OpState::kCompleted || state == OpState::kFailed) r.ended_us = r.started_us + 3000000;
  return r;
}

// rank_dump makes the dump of `rank` in a default group of `world` ranks
// that completed `completed` all_reduces of 1 Mi floats, then recorded
// `extra` (its progress counters follow the entries' states).
RankDump rank_dump(int rank, int world, uint64_t completed, std::vector<TraceRecord> extra = {}) {
  RankDump d;
  d.global_rank = rank;
  GroupDump g;
  g.name = "default";
  g.rank = rank;
  g.size = world;
  for (int r = 0; r < world; ++r) g.global_ranks.push_back(r);
  for (uint64_t s = 1; s <= completed; ++s)
    g.entries.push_back(collective(s, "all_reduce", 1 << 20, OpState::kCompleted));
  g.collectives = Progress{completed, completed, completed, 0, completed};
  for (TraceRecord& r : extra) {
    g.collectives.enqueued = std::max(g.collectives.enqueued, r.sequence);
    if (r.state != OpState::kScheduled) g.collectives.started = std::max(g.collectives.started, r.sequence);
    if (r.state == OpState::kCompleted)
      g.collectives.completed = std::max(g.collectives.completed, r.sequence);
    if (r.state == OpState::kFailed) g.collectives.failed = std::max(g.collectives.failed, r.sequence);
    g.entries.push_back(std::move(r));
  }
  d.groups.push_back(std::move(g));
  return d;
}

bool has_line(const Verdict& v, const std::string& line) {
  for (const std::string& l : v.lines) {
    if (l == line) return true;
  }
  return false;
}

std::string all_lines(const Verdict& v) {
  std::string s;
  for (const std::string& l : v.lines) s += l + "\n";
  return s;
}

TEST(TraceVerdictTest, NamesTheRankThatNeverStartedTheStuckCollective) {
  TraceRecord failed = collective(5, "all_reduce", 1 << 20, OpState::kFailed);
  failed.error = "all_reduce #5 of group default timed out: still waiting to receive from ranks [1]";
  const Verdict v =
      analyze_dumps({rank_dump(0, 3, 4, {failed}), rank_dump(1, 3, 4), rank_dump(2, 3, 4, {failed})});
  EXPECT_TRUE(v.problems);
  EXPECT_TRUE(has_line(v,
                       "group default collective #5 (all_reduce, 4 MiB float32): ranks {1} never started it; "
                       "rank 1's last completed is #4"))
      << all_lines(v);
  EXPECT_TRUE(has_line(v, "  rank 0: failed after 3.0 s: " + failed.error)) << all_lines(v);
}

TEST(TraceVerdictTest, SeveralLateRanksEachWithTheirLastCompleted) {
  TraceRecord started = collective(7, "broadcast", 10, OpState::kStarted, "int64");
  started.peer = 0;
  const Verdict v = analyze_dumps(
      {rank_dump(0, 4, 6, {started}), rank_dump(1, 4, 6), rank_dump(2, 4, 5), rank_dump(3, 4, 6, {started})});
  EXPECT_TRUE(has_line(v,
                       "group default collective #6 (all_reduce, 4 MiB float32): ranks {2} never started it; "
                       "rank 2's last completed is #5"))
      << "the first collective not everyone completed comes first: " << all_lines(v);
  const Verdict later = analyze_dumps(
      {rank_dump(0, 4, 6, {started}), rank_dump(1, 4, 6), rank_dump(2, 4, 6), rank_dump(3, 4, 6, {started})});
  EXPECT_TRUE(has_line(later,
                       "group default collective #7 (broadcast, 80 B int64): ranks {1,2} never started it; "
                       "rank 1's last completed is #6, rank 2's last completed is #6"))
      << all_lines(later);
}

TEST(TraceVerdictTest, MissingDumpsAreNamed) {
  TraceRecord failed = collective(1, "all_reduce", 1 << 16, OpState::kFailed);
  const Verdict v = analyze_dumps({rank_dump(0, 3, 0, {failed}), rank_dump(2, 3, 0, {failed})});
  EXPECT_TRUE(v.problems);
  ASSERT_FALSE(v.lines.empty());
  EXPECT_EQ(v.lines[0].rfind("ranks {1} left no dump", 0), 0u) << all_lines(v);
  EXPECT_TRUE(
      has_line(v,
               "group default collective #1 (all_reduce, 256 KiB float32): every rank that left a dump "
               "started it and none completed it (look at how it failed below)"))
      << all_lines(v);
}

TEST(TraceVerdictTest, ARankThatDumpedWithoutTheGroupIsNamed) {
  RankDump r1 = rank_dump(1, 2, 3);
  r1.groups.clear();
  const Verdict v = analyze_dumps({rank_dump(0, 2, 3), r1});
  EXPECT_TRUE(v.problems);
  EXPECT_TRUE(has_line(v, "group default: ranks {1} dumped without it (they destroyed it, or never made it)"))
      << all_lines(v);
}

TEST(TraceVerdictTest, DifferentOperationsUnderOneSequenceNumberAreAMismatch) {
  TraceRecord bcast = collective(3, "broadcast", 1 << 20, OpState::kStarted);
  bcast.peer = 0;
  TraceRecord small = collective(3, "all_reduce", 1000, OpState::kStarted);
  TraceRecord same = collective(3, "all_reduce", 1 << 20, OpState::kStarted);
  const Verdict v =
      analyze_dumps({rank_dump(0, 3, 2, {same}), rank_dump(1, 3, 2, {bcast}), rank_dump(2, 3, 2, {small})});
  EXPECT_TRUE(v.problems);
  EXPECT_TRUE(
      has_line(v,
               "group default collective #3: ranks disagree: ranks {2} called all_reduce float32 count "
               "1000; ranks {0} called all_reduce float32 count 1048576; ranks {1} called broadcast "
               "float32 count 1048576 root 0"))
      << all_lines(v);
}

TEST(TraceVerdictTest, AllGatherInputsMayDifferButTheirTotalMayNot) {
  TraceRecord a = collective(1, "all_gather", 0, OpState::kCompleted);
  a.input_count = 3;
  a.output_count = 7;
  TraceRecord b = a;
  b.input_count = 4;
  const Verdict v = analyze_dumps({rank_dump(0, 2, 0, {a}), rank_dump(1, 2, 0, {b})});
  EXPECT_FALSE(v.problems) << all_lines(v);
  EXPECT_TRUE(has_line(v, "group default: in step; every rank completed collective #1 and none is pending"))
      << all_lines(v);
  b.output_count = 8;
  EXPECT_TRUE(analyze_dumps({rank_dump(0, 2, 0, {a}), rank_dump(1, 2, 0, {b})}).problems);
}

TEST(TraceVerdictTest, AJobInStepHasNoProblemsAndPendingPointToPointIsListed) {
  EXPECT_FALSE(analyze_dumps({rank_dump(0, 2, 9), rank_dump(1, 2, 9)}).problems);
  RankDump r0 = rank_dump(0, 2, 9);
  TraceRecord recv;
  recv.op = "recv";
  recv.collective = false;
  recv.sequence = 4;
  recv.state = OpState::kStarted;
  recv.input_count = recv.output_count = 2;
  recv.dtype = "int32";
  recv.peer = 1;
  recv.tag = 5;
  r0.groups[0].entries.push_back(recv);
  const Verdict v = analyze_dumps({r0, rank_dump(1, 2, 9)});
  EXPECT_TRUE(
      has_line(v,
               "group default: rank 0's recv from 1 tag 5 (p2p #4, 8 B int32) was still in flight when "
               "it dumped"))
      << all_lines(v);
}

}  // namespace
}  // namespace cohort::testing
