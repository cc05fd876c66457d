// The stall inspector on groups' traces sharing a store, with the clock in
// the test's hands: who is named, when warnings come, and a failing store.
#include "diagnostics/stall_inspector.h"

#include <gtest/gtest.h>

#include "cohort/errors.h"
#include "cohort/hash_store.h"
#include "diagnostics/group_trace.h"

namespace cohort::testing {
namespace {

constexpr int64_t kMs = 1000000;

OpShape one_float() {
  static float x;
  return shape_of(Buffer::of(&x, 1));
}

std::vector<std::unique_ptr<GroupTrace>> traces(int world, const std::shared_ptr<Store>& store) {
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(r);
  std::vector<std::unique_ptr<GroupTrace>> out;
  for (int r = 0; r < world; ++r)
    out.push_back(std::make_unique<GroupTrace>("default", r, ranks, "cohort", store, 16));
  return out;
}

// complete_collective runs collective `sequence` to completion on `g`.
void complete_collective(GroupTrace& g, uint64_t sequence) {
  g.finish(g.recorder().began("all_reduce", one_float(), sequence), nullptr);
}

TEST(StallInspectorTest, NamesTheRankThatHasNotJoinedAndRepeatsAtDoublingIntervals) {
  auto store = std::make_shared<HashStore>();
  auto g = traces(3, store);
  std::vector<StallInspector> inspectors(3, StallInspector(0.5));
  for (int r = 0; r < 3; ++r) complete_collective(*g[r], 1);
  const int64_t t = trace_clock_ns();
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(inspectors[r].tick(*g[r], t).empty());  // publishes "1 1"
  // Ranks 0 and 1 start collective #2; rank 2 is elsewhere.
  const TraceTicket t0 = g[0]->recorder().began("all_reduce", one_float(), 2);
  g[1]->recorder().began("all_reduce", one_float(), 2);
  const int64_t start = g[0]->recorder().running_since_ns();
  EXPECT_TRUE(inspectors[0].tick(*g[0], start + 100 * kMs).empty());
  EXPECT_TRUE(
      inspectors[1].tick(*g[1], start + 300 * kMs).empty());  // pending for half the threshold: publishes
  auto w = inspectors[0].tick(*g[0], start + 600 * kMs);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(
      w[0],
      "all_reduce #2 of group default (4 B float32) has been pending for 0.6 s on rank 0; ranks [2] have "
      "not joined it (rank 2 last started #1)");
  EXPECT_TRUE(inspectors[0].tick(*g[0], start + 900 * kMs).empty());
  EXPECT_EQ(inspectors[0].tick(*g[0], start + 1000 * kMs).size(), 1u);
  EXPECT_TRUE(inspectors[0].tick(*g[0], start + 1900 * kMs).empty());
  EXPECT_EQ(inspectors[0].tick(*g[0], start + 2000 * kMs).size(), 1u);
  g[0]->finish(t0, nullptr);
  EXPECT_TRUE(inspectors[0].tick(*g[0], start + 10000 * kMs).empty()) << "it completed: no more warnings";
}

TEST(StallInspectorTest, ARankThatNeverPublishedHasStartedNothing) {
  auto store = std::make_shared<HashStore>();
  auto g = traces(2, store);
  StallInspector inspector(1);
  g[0]->recorder().began("barrier", OpShape{}, 1);
  auto w = inspector.tick(*g[0], g[0]->recorder().running_since_ns() + 1500 * kMs);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "barrier #1 of group default has been pending for 1.5 s on rank 0; ranks [1] have not joined it "
            "(rank 1 last started nothing)");
}

TEST(StallInspectorTest, SubgroupsNameGlobalRanksToo) {
  auto store = std::make_shared<HashStore>();
  GroupTrace g("group_1", 0, {2, 5}, "cohort", store, 16);
  StallInspector inspector(1);
  g.recorder().began("all_reduce", one_float(), 1);
  auto w = inspector.tick(g, g.recorder().running_since_ns() + 1000 * kMs);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("ranks [1] (global ranks [5]) have not joined it"), std::string::npos) << w[0];
}

TEST(StallInspectorTest, WithoutAStoreTheWarningSaysTheLateRanksAreUnknown) {
  GroupTrace g("mpi_group", 0, {0, 1}, "mpi", nullptr, 0);  // no ring either: the counters suffice
  StallInspector inspector(1);
  g.recorder().began("all_reduce", one_float(), 1);
  auto w = inspector.tick(g, g.recorder().running_since_ns() + 1000 * kMs);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(
      w[0],
      "collective #1 of group mpi_group has been pending for 1.0 s on rank 0; the group has no store, so "
      "the ranks that have not joined it are unknown");
}

// A store whose every call fails, as one whose server is gone.
class FailingStore : public Store {
 public:
  int calls = 0;
  void set(const std::string&, const Bytes&) override { fail(); }
  Bytes get(const std::string&) override { fail(); }
  int64_t add(const std::string&, int64_t) override { fail(); }
  Bytes compare_set(const std::string&, const Bytes&, const Bytes&) override { fail(); }
  bool check(const std::vector<std::string>&) override { fail(); }
  void wait(const std::vector<std::string>&, std::chrono::milliseconds) override { fail(); }
  bool delete_key(const std::string&) override { fail(); }
  int64_t num_keys() override { fail(); }
  void append(const std::string&, const Bytes&) override { fail(); }
  std::vector<Bytes> multi_get(const std::vector<std::string>&) override { fail(); }
  void multi_set(const std::vector<std::string>&, const std::vector<Bytes>&) override { fail(); }
  std::chrono::milliseconds timeout() const override { return std::chrono::seconds(1); }
  void set_timeout(std::chrono::milliseconds) override {}

 private:
  [[noreturn]] void fail() {
    ++calls;
    throw StoreError("the store at 10.0.0.1:29500 closed the connection");
  }
};

// A store that fails while nothing is pending (a job ending: the rank that
// hosts it has left) is no warning; the stall warning that comes later
// says it failed, and why, and the store is never used again.
TEST(StallInspectorTest, AStoreFailingWhileIdleIsNoWarningButTheStallWarningSaysWhy) {
  auto store = std::make_shared<FailingStore>();
  GroupTrace g("default", 0, {0, 1}, "cohort", store, 16);
  StallInspector inspector(1);
  complete_collective(g, 1);
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(inspector.tick(g, trace_clock_ns()).empty());  // the publish fails
  const std::string idle_log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(idle_log.find("stall inspector: the store"), std::string::npos) << idle_log;
  g.recorder().began("all_reduce", one_float(), 2);
  auto w = inspector.tick(g, g.recorder().running_since_ns() + 5000 * kMs);
  EXPECT_EQ(store->calls, 1);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("the ranks that have not joined it are unknown (the group's store failed: the store at "
                      "10.0.0.1:29500 closed the connection)"),
            std::string::npos)
      << w[0];
}

// A store that fails while a collective is pending is a warning, once.
TEST(StallInspectorTest, AStoreFailingWhileACollectiveIsPendingIsLoggedOnceAndNeverUsedAgain) {
  auto store = std::make_shared<FailingStore>();
  GroupTrace g("default", 0, {0, 1}, "cohort", store, 16);
  StallInspector inspector(1);
  complete_collective(g, 1);
  g.recorder().began("all_reduce", one_float(), 2);
  ::testing::internal::CaptureStderr();
  // Pending past half the threshold: the progress is published at once (and fails).
  auto w = inspector.tick(g, g.recorder().running_since_ns() + 600 * kMs);
  EXPECT_TRUE(w.empty());
  w = inspector.tick(g, g.recorder().running_since_ns() + 5000 * kMs);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(store->calls, 1);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("(the group's store failed: "), std::string::npos) << w[0];
  const std::string once = "stall inspector: the store of group default failed";
  ASSERT_NE(log.find(once), std::string::npos) << log;
  EXPECT_EQ(log.find(once, log.find(once) + 1), std::string::npos) << "logged twice: " << log;
  EXPECT_NE(log.find("closed the connection"), std::string::npos) << log;
}

TEST(StallInspectorTest, QuietPointToPointNamesTheOldestOperationsPeer) {
  GroupTrace g("default", 0, {0, 1}, "cohort", nullptr, 16);
  StallInspector inspector(1);
  int32_t x[2];
  const TraceTicket recv =
      g.recorder().scheduled("recv from 1 tag 3", p2p_shape(Buffer::of(x, 2), 1, 3), 1, false);
  g.recorder().started(recv);
  const int64_t t = trace_clock_ns();
  EXPECT_TRUE(inspector.tick(g, t).empty());  // starts watching
  auto w = inspector.tick(g, t + 1200 * kMs);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "1 point-to-point operation of group default in flight on rank 0, none finished for 1.2 s; the "
            "oldest is recv from 1 tag 3 (p2p #1, 8 B int32), waiting for ranks [1]");
  g.finish(recv, nullptr);
  EXPECT_TRUE(inspector.tick(g, t + 5000 * kMs).empty());
}

}  // namespace
}  // namespace cohort::testing
