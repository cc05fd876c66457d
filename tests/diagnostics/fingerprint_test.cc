// Fingerprints (what a rank calls) and their comparison, and the check's
// exchange through a store, which backends without one of their own (NCCL)
// use.
#include "diagnostics/fingerprint.h"

#include <gtest/gtest.h>

#include <thread>

#include "cohort/config.h"
#include "cohort/hash_store.h"
#include "process_group/desync_check.h"

namespace cohort::testing {
namespace {

using std::chrono::milliseconds;

Fingerprint all_reduce_of(size_t n, ReduceOp op = ReduceOp::SUM) {
  return Fingerprint(CollectiveCall::kAllReduce, DType::kFloat32, n).with_reduce_op(op);
}

std::vector<Buffer> counts(std::vector<size_t> n) {
  std::vector<Buffer> out;
  for (size_t c : n) out.push_back(Buffer{nullptr, c, DType::kFloat32, {}});
  return out;
}

TEST(FingerprintTest, DescribesEachCallAsTheUserWroteIt) {
  EXPECT_EQ(describe(all_reduce_of(1024)), "all_reduce(float32, 1024 elements, SUM)");
  EXPECT_EQ(describe(Fingerprint(CollectiveCall::kBroadcast, DType::kInt64, 1).with_root(2)),
            "broadcast(int64, 1 element, root 2)");
  EXPECT_EQ(describe(Fingerprint(CollectiveCall::kReduce, DType::kBFloat16, 3)
                         .with_root(0)
                         .with_reduce_op(ReduceOp::premul_sum(0.5))),
            "reduce(bfloat16, 3 elements, root 0, PREMUL_SUM)");
  EXPECT_EQ(
      describe(Fingerprint(CollectiveCall::kAllGather, DType::kUInt8, 2).with_per_rank(counts({2, 2, 2}))),
      "all_gather(uint8, 2 elements, 6 in all)");
  EXPECT_EQ(describe(Fingerprint(CollectiveCall::kAllToAllSingle, DType::kFloat32, 8).with_received(6)),
            "all_to_all_single(float32, 8 elements out, 6 in)");
  EXPECT_EQ(describe(Fingerprint(CollectiveCall::kBarrier)), "barrier()");
}

TEST(FingerprintTest, RanksThatAgreeAgree) {
  std::vector<Fingerprint> all(4, all_reduce_of(16));
  EXPECT_TRUE(fingerprints_agree(all.data(), 4));
  all[3] = all_reduce_of(16, ReduceOp::MIN);
  EXPECT_FALSE(fingerprints_agree(all.data(), 4));
}

TEST(FingerprintTest, GatherRootExpectingOtherCountsThanTheRanksPassDisagrees) {
  // Uneven gathers are fine when the root expects what each rank passes.
  std::vector<Fingerprint> all = {
      Fingerprint(CollectiveCall::kGather, DType::kFloat32, 1).with_root(0).with_per_rank(counts({1, 2, 3})),
      Fingerprint(CollectiveCall::kGather, DType::kFloat32, 2).with_root(0),
      Fingerprint(CollectiveCall::kGather, DType::kFloat32, 3).with_root(0)};
  EXPECT_TRUE(fingerprints_agree(all.data(), 3));
  all[2].count = 4;
  EXPECT_FALSE(fingerprints_agree(all.data(), 3));
  const uint8_t arrived[] = {1, 1, 1};
  EXPECT_EQ(
      mismatch_report(1, "g", all.data(), arrived, 3, nullptr),
      "collective #1 of group g: ranks differ: rank 0: gather(float32, 1 element, 6 in all, root 0); rank 1: "
      "gather(float32, 2 elements, root 0); rank 2: gather(float32, 4 elements, root 0)");
}

TEST(FingerprintTest, AllToAllThatSendsMoreThanTheRanksReceiveDisagrees) {
  std::vector<Fingerprint> all = {Fingerprint(CollectiveCall::kAllToAll, DType::kInt32, 3).with_received(2),
                                  Fingerprint(CollectiveCall::kAllToAll, DType::kInt32, 2).with_received(3)};
  EXPECT_TRUE(fingerprints_agree(all.data(), 2));
  all[1].count = 3;
  EXPECT_FALSE(fingerprints_agree(all.data(), 2));
}

TEST(FingerprintTest, CallsThatReadAlikeButDifferAreToldApart) {
  // Same totals, per-rank counts in another order: rank 1 gives 2, but rank
  // 0 expects 1 from it.
  std::vector<Fingerprint> all = {
      Fingerprint(CollectiveCall::kAllGather, DType::kFloat32, 2).with_per_rank(counts({2, 1})),
      Fingerprint(CollectiveCall::kAllGather, DType::kFloat32, 2).with_per_rank(counts({2, 2}))};
  all[1].total = 3;  // what a bad build would send; reads like rank 0's
  ASSERT_EQ(describe(all[0]), describe(all[1]));
  EXPECT_FALSE(fingerprints_agree(all.data(), 2));
  const uint8_t arrived[] = {1, 1};
  const std::string report = mismatch_report(1, "g", all.data(), arrived, 2, nullptr);
  EXPECT_NE(report.find("rank 0: all_gather(float32, 2 elements, 3 in all) [sequence 0, per-rank counts "),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("; rank 1: all_gather(float32, 2 elements, 3 in all) [sequence 0, per-rank counts "),
            std::string::npos)
      << report;
}

TEST(FingerprintTest, RunsOfRanksAreWrittenAsRanges) {
  std::vector<Fingerprint> all(6, all_reduce_of(4));
  all[3] = all_reduce_of(5);
  const uint8_t arrived[] = {1, 1, 1, 1, 1, 0};
  Fingerprint last = all_reduce_of(4);
  last.sequence = 8;
  EXPECT_EQ(
      mismatch_report(9, "g", all.data(), arrived, 6, &last),
      "collective #9 of group g: ranks differ: ranks 0-2,4: all_reduce(float32, 4 elements, SUM); rank 3: "
      "all_reduce(float32, 5 elements, SUM); rank 5: no collective #9 before the timeout (its last was #8: "
      "all_reduce(float32, 4 elements, SUM))");
}

// A backend that has no fingerprint exchange of its own, as NCCL's.
class StorelessExchangeBackend : public Backend {
 public:
  StorelessExchangeBackend() : Backend("no-exchange") {}
};

// check_through_store runs `calls[q]` as rank q's fingerprint of collective
// #sequence through a store shared by the ranks (only ranks with a call take
// part); returns each rank's Status message ("" when ok).
std::vector<std::string> check_through_store(std::vector<std::unique_ptr<DesyncCheck>>& checks,
                                             std::vector<const Fingerprint*> calls, uint64_t sequence,
                                             milliseconds timeout) {
  std::vector<std::string> out(checks.size());
  std::vector<std::thread> threads;
  const std::string what = "a collective";
  for (size_t q = 0; q < checks.size(); ++q) {
    if (!calls[q]) continue;
    threads.emplace_back([&, q] {
      OpContext op{sequence, Deadline::after(timeout), &what, nullptr};
      Status st = checks[q]->check(*calls[q], op);
      out[q] = st.ok() ? "" : st.message();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(DesyncCheckThroughStore, ReportsDifferentCallsAndMissingRanksAndDropsOldKeys) {
  set_config("COHORT_DEBUG", "detail");
  auto store = std::make_shared<HashStore>();
  StorelessExchangeBackend backend;
  std::vector<std::unique_ptr<DesyncCheck>> checks;
  for (int q = 0; q < 3; ++q) checks.push_back(DesyncCheck::make(backend, q, 3, "g", store));
  reset_config("COHORT_DEBUG");
  ASSERT_TRUE(checks[0] && checks[0]->through_store());
  const Fingerprint a = all_reduce_of(4), b = all_reduce_of(5);
  for (uint64_t n = 1; n <= 3; ++n) {
    EXPECT_EQ(check_through_store(checks, {&a, &a, &a}, n, milliseconds(10000)),
              std::vector<std::string>(3, ""));
  }
  // Each rank removed its key of #1 on reaching #3.
  EXPECT_FALSE(store->check({"desync/1/0"}) || store->check({"desync/1/1"}) || store->check({"desync/1/2"}));
  EXPECT_TRUE(store->check({"desync/2/0", "desync/3/2"}));
  EXPECT_EQ(
      check_through_store(checks, {&a, &b, &a}, 4, milliseconds(10000)),
      std::vector<std::string>(3,
                               "collective #4 of group g: ranks differ: ranks 0,2: all_reduce(float32, 4 "
                               "elements, SUM); rank 1: all_reduce(float32, 5 elements, SUM)"));
  const std::string missing =
      "collective #5 of group g: ranks differ: ranks 0,1: all_reduce(float32, 4 elements, SUM); rank 2: no "
      "collective #5 before the timeout (its last was #3: all_reduce(float32, 4 elements, SUM))";
  EXPECT_EQ(check_through_store(checks, {&a, &a, nullptr}, 5, milliseconds(200)),
            (std::vector<std::string>{missing, missing, ""}));
}

}  // namespace
}  // namespace cohort::testing
