// RPC (cohort/rpc.h) between worker processes: tests/torch/rpc_worker
// runs each scenario and checks what it got; here, each worker's verdict
// and exit code.
#include <gtest/gtest.h>

#include "support/subprocess.h"
#include "torch/worker_ranks.h"

namespace cohort::testing {
namespace {

void expect_ok(const std::vector<std::string>& out, const std::string& scenario, const std::vector<int>& ranks) {
  for (int r : ranks) {
    EXPECT_NE(out[r].find("rank " + std::to_string(r) + " ok: " + scenario), std::string::npos) << out[r];
  }
}

TEST(Rpc, CallsCarryEveryValueKindAndRaiseWhatTheCalleeRaised) {
  auto out = start_ranks(3, {binary_path("tests/rpc_worker"), "calls"});
  expect_ok(out, "calls", {0, 1, 2});
}

TEST(Rpc, RRefsAreDeletedByTheirOwnerOnceEveryUserIsGone) {
  auto out = start_ranks(3, {binary_path("tests/rpc_worker"), "rrefs"});
  expect_ok(out, "rrefs", {0, 1, 2});
}

TEST(Rpc, AKilledWorkerFailsTheCallsWaitingOnItAndTheOthersGoOn) {
  auto out = start_ranks(3, {binary_path("tests/rpc_worker"), "kill"}, {}, {0, 128 + 9, 0});
  expect_ok(out, "kill", {0, 2});
}

TEST(Rpc, GracefulShutdownWaitsForTheCallsInFlight) {
  auto out = start_ranks(2, {binary_path("tests/rpc_worker"), "shutdown"});
  expect_ok(out, "shutdown", {0, 1});
}

TEST(Rpc, DistributedAutogradAndOptimizerEqualOneProcess) {
  auto out = start_ranks(3, {binary_path("tests/rpc_worker"), "autograd"});
  expect_ok(out, "autograd", {0, 1, 2});
}

}  // namespace
}  // namespace cohort::testing
