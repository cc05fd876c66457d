// The flight recorder's ring (wrapping, states, times, counters) and what
// a real group records, read back from its dump.
#include "diagnostics/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "cohort/config.h"
#include "diagnostics/group_monitor.h"
#include "diagnostics/trace_dump.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

OpShape four_floats() {
  float x[4];
  return shape_of(Buffer::of(x, 4));
}

TEST(FlightRecorderTest, TheRingKeepsTheLastEntriesAndWraps) {
  FlightRecorder rec(4);
  for (uint64_t s = 1; s <= 10; ++s) {
    TraceTicket t = rec.began("all_reduce", four_floats(), s);
    rec.finished(t, nullptr);
  }
  auto entries = rec.snapshot();
  ASSERT_EQ(entries.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(entries[i].sequence, 7 + i);
    EXPECT_EQ(entries[i].state, OpState::kCompleted);
    EXPECT_STREQ(entries[i].op, "all_reduce");
    EXPECT_EQ(entries[i].shape.input_count, 4u);
    EXPECT_EQ(entries[i].shape.dtype, DType::kFloat32);
  }
  Progress p = rec.progress(true);
  EXPECT_EQ(p.enqueued, 10u);
  EXPECT_EQ(p.started, 10u);
  EXPECT_EQ(p.completed, 10u);
  EXPECT_EQ(p.finished, 10u);
  EXPECT_EQ(p.failed, 0u);
  EXPECT_FALSE(rec.find(6, true).has_value()) << "overwritten";
  EXPECT_TRUE(rec.find(7, true).has_value());
}

// The ring's slots are made as the ids reach them: a ring not yet full
// holds what was recorded, reads it back in order, and wraps at the
// capacity it was given, not at what it has made so far.
TEST(FlightRecorderTest, ARingNotYetFullReadsBackWhatItHoldsAndWrapsAtItsCapacity) {
  FlightRecorder rec(5);
  EXPECT_EQ(rec.capacity(), 5u);
  EXPECT_TRUE(rec.snapshot().empty());
  for (uint64_t s = 1; s <= 3; ++s) rec.finished(rec.began("broadcast", four_floats(), s), nullptr);
  EXPECT_EQ(rec.capacity(), 5u);
  auto entries = rec.snapshot();
  ASSERT_EQ(entries.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(entries[i].sequence, i + 1);
  uint64_t last = 0;
  EXPECT_EQ(rec.newest(1, 10, &last).size(), 2u);
  EXPECT_EQ(last, 3u);
  EXPECT_TRUE(rec.find(2, true).has_value());
  for (uint64_t s = 4; s <= 7; ++s) rec.finished(rec.began("broadcast", four_floats(), s), nullptr);
  entries = rec.snapshot();
  ASSERT_EQ(entries.size(), 5u);
  EXPECT_EQ(entries.front().sequence, 3u);
  EXPECT_EQ(entries.back().sequence, 7u);
  EXPECT_EQ(entries.back().state, OpState::kCompleted);
  EXPECT_EQ(rec.newest(0, 10, &last).size(), 5u);
  EXPECT_FALSE(rec.find(2, true).has_value()) << "overwritten";
}

TEST(FlightRecorderTest, AnEntryMovesFromScheduledToStartedToCompletedOrFailedWithItsTimes) {
  FlightRecorder rec(8);
  TraceTicket a = rec.scheduled("broadcast", four_floats(), 1, true);
  TraceTicket b = rec.scheduled("recv from 1 tag 7",
                                p2p_shape(Buffer::of(static_cast<int32_t*>(nullptr), 3), 1, 7), 1, false);
  auto e = rec.snapshot();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].state, OpState::kScheduled);
  EXPECT_GT(e[0].enqueued_ns, 0);
  EXPECT_EQ(e[0].started_ns, 0);
  EXPECT_STREQ(e[1].op, "recv") << "point-to-point entries keep the description's first word";
  EXPECT_EQ(e[1].shape.peer, 1);
  EXPECT_EQ(e[1].shape.tag, 7);
  EXPECT_FALSE(e[1].collective);

  rec.started(a);
  rec.started(b);
  EXPECT_EQ(rec.progress(true).started, 1u);
  EXPECT_EQ(rec.progress(true).finished, 0u);
  EXPECT_GE(rec.running_since_ns(), rec.snapshot()[0].enqueued_ns);
  rec.finished(a, nullptr);
  const std::string why = "recv from 1 tag 7 (p2p #1) of group g timed out";
  rec.finished(b, &why);
  e = rec.snapshot();
  EXPECT_EQ(e[0].state, OpState::kCompleted);
  EXPECT_GE(e[0].started_ns, e[0].enqueued_ns);
  EXPECT_GE(e[0].ended_ns, e[0].started_ns);
  EXPECT_EQ(e[1].state, OpState::kFailed);
  EXPECT_EQ(e[1].error, why);
  EXPECT_EQ(rec.progress(false).failed, 1u);
  EXPECT_EQ(rec.progress(false).completed, 0u);
  EXPECT_EQ(rec.progress(false).finished, 1u);
}

TEST(FlightRecorderTest, ALateCompletionDoesNotTouchTheEntryThatReplacedIt) {
  FlightRecorder rec(2);
  TraceTicket old = rec.scheduled("recv from 0 tag 0", OpShape{}, 1, false);
  rec.started(old);
  TraceTicket a = rec.began("all_reduce", four_floats(), 1);
  TraceTicket b = rec.began("all_reduce", four_floats(), 2);  // takes old's slot
  (void)a;
  (void)b;
  rec.finished(old, nullptr);
  for (const TraceEntry& e : rec.snapshot()) {
    EXPECT_TRUE(e.collective);
    EXPECT_EQ(e.state, OpState::kStarted) << "entry #" << e.sequence << " was changed by an older ticket";
  }
  EXPECT_EQ(rec.progress(false).completed, 1u) << "the counters still count it";
}

TEST(FlightRecorderTest, WithoutARingOnlyTheCountersAreKept) {
  FlightRecorder rec(0);
  TraceTicket t = rec.began("barrier", OpShape{}, 1);
  EXPECT_EQ(t.id, 0u);
  rec.finished(t, nullptr);
  EXPECT_TRUE(rec.snapshot().empty());
  EXPECT_FALSE(rec.find(1, true).has_value());
  EXPECT_EQ(rec.progress(true).completed, 1u);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A group's inline and queued collectives, and its point-to-point
// operations, as its dump shows them.
TEST(FlightRecorderTest, AGroupRecordsEveryPathAndDumpsOneFilePerRank) {
  char dir_template[] = "/tmp/cohort-trace-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  set_config("COHORT_TRACE_DIR", dir);
  // Rank 0 dumps once both ranks are out of the first barrier: returning
  // from the group's barrier on rank 0 does not mean rank 1 has recorded
  // its own as done.
  std::atomic<int> out_of_barrier{0};
  run_ranks(2, [&out_of_barrier](ProcessGroup& g) {
    std::vector<float> v(1000, 1.0f);
    g.all_reduce(Buffer::of(v));  // blocking on an idle group: the caller's thread
    AllReduceOptions async;
    async.async_op = true;
    g.all_reduce(Buffer::of(v), async)->wait();  // the worker
    int32_t x = g.rank();
    if (g.rank() == 0) {
      g.send(Buffer::of(&x, 1), 1, P2POptions{{}, 9});
    } else {
      g.recv(Buffer::of(&x, 1), 0, P2POptions{{}, 9});
    }
    g.barrier();
    out_of_barrier.fetch_add(1);
    while (out_of_barrier.load() < 2) std::this_thread::yield();
    if (g.rank() == 0) dump_traces("test");
    g.barrier();  // rank 1 is still in the group while rank 0 dumps
  });
  reset_config("COHORT_TRACE_DIR");
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path = dir + "/rank_" + std::to_string(rank) + ".json";
    auto dump = parse_rank_dump(read_file(path));
    ASSERT_TRUE(dump.ok()) << path << ": " << dump.status().message();
    EXPECT_EQ(dump.value().reason, "test");
    EXPECT_EQ(dump.value().pid, getpid());
    ASSERT_EQ(dump.value().groups.size(), 1u);
    const GroupDump& g = dump.value().groups[0];
    EXPECT_EQ(g.name, "test");
    EXPECT_EQ(g.rank, rank);
    EXPECT_EQ(g.global_ranks, (std::vector<int>{0, 1}));
    EXPECT_EQ(g.collectives.completed, 3u);  // two all_reduces and a barrier
    // The second barrier is running on rank 1 (or done on both) when rank 0 dumps.
    ASSERT_GE(g.entries.size(), 4u);
    EXPECT_EQ(g.entries[0].op, "all_reduce");
    EXPECT_EQ(g.entries[0].sequence, 1u);
    EXPECT_EQ(g.entries[0].state, OpState::kCompleted);
    EXPECT_EQ(g.entries[0].input_count, 1000u);
    EXPECT_EQ(g.entries[0].dtype, "float32");
    EXPECT_EQ(g.entries[1].sequence, 2u);
    EXPECT_EQ(g.entries[1].state, OpState::kCompleted);
    EXPECT_LE(g.entries[1].enqueued_us, g.entries[1].started_us);
    EXPECT_LE(g.entries[1].started_us, g.entries[1].ended_us);
    EXPECT_FALSE(g.entries[2].collective);
    EXPECT_EQ(g.entries[2].op, rank == 0 ? "send" : "recv");
    EXPECT_EQ(g.entries[2].peer, 1 - rank);
    EXPECT_EQ(g.entries[2].tag, 9);
    EXPECT_EQ(g.entries[2].state, OpState::kCompleted);
    EXPECT_EQ(g.entries[3].op, "barrier");
    EXPECT_EQ(g.entries[3].dtype, "");
    EXPECT_EQ(g.p2p.completed, 1u);
  }
  for (int rank = 0; rank < 2; ++rank) unlink((dir + "/rank_" + std::to_string(rank) + ".json").c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace cohort::testing
