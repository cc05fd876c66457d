// DataParallel (cohort/data_parallel.h) on CPU "devices", which are
// threads: forward and backward equal one replica's on the whole batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>
#include <set>
#include <thread>

#include "cohort/data_parallel.h"
#include "cohort/errors.h"

namespace cohort::testing {
namespace {

// ThreadsSeen records which threads ran a forward.
struct ThreadsSeen {
  std::mutex mu;
  std::set<std::thread::id> ids;
};
ThreadsSeen& threads_seen() {
  static ThreadsSeen seen;
  return seen;
}

// A user module (Cloneable, as DataParallel needs): a small MLP that notes
// the thread of each forward.
struct NetImpl : torch::nn::Cloneable<NetImpl> {
  NetImpl() { reset(); }
  void reset() override {
    fc1 = register_module("fc1", torch::nn::Linear(6, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 3));
  }
  at::Tensor forward(const at::Tensor& x) {
    {
      std::lock_guard<std::mutex> lock(threads_seen().mu);
      threads_seen().ids.insert(std::this_thread::get_id());
    }
    return fc2(torch::tanh(fc1(x)));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);

Net seeded_net() {
  torch::manual_seed(3);
  Net net;
  net->to(at::kDouble);
  return net;
}

bool close(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::allclose(a, b, 1e-12, 1e-12);
}

// Two steps of SGD: the outputs, the gradients the module collects and the
// parameters after each step equal one module's on the whole batch.
void check_data_parallel(int devices, int64_t batch) {
  Net reference = seeded_net(), net = seeded_net();
  DataParallel<Net> dp(net, cpu_devices(devices));
  torch::optim::SGD on_reference(reference->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD on_net(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::manual_seed(5);
  threads_seen().ids.clear();
  for (int step = 0; step < 2; ++step) {
    const at::Tensor x = torch::randn({batch, 6}, at::kDouble), target = torch::randn({batch, 3}, at::kDouble);
    on_reference.zero_grad();
    on_net.zero_grad();
    const at::Tensor want = reference->forward(x), got = dp.forward(x);
    ASSERT_TRUE(close(got, want)) << "step " << step << " output";
    torch::mse_loss(want, target).backward();
    torch::mse_loss(got, target).backward();
    const auto mine = net->named_parameters(), theirs = reference->named_parameters();
    for (const auto& p : theirs) {
      ASSERT_TRUE(mine[p.key()].grad().defined()) << p.key();
      EXPECT_TRUE(close(mine[p.key()].grad(), p.value().grad())) << "step " << step << " gradient of " << p.key();
    }
    on_reference.step();
    on_net.step();
    for (const auto& p : theirs) EXPECT_TRUE(close(mine[p.key()], p.value())) << "step " << step << " " << p.key();
  }
  // The replicas ran on as many threads as there were pieces (the test
  // thread is one of them; the reference's forward ran there too).
  const int64_t pieces = std::min<int64_t>(devices, batch);
  EXPECT_EQ(static_cast<int64_t>(threads_seen().ids.size()), pieces);
}

TEST(DataParallel, TwoCpuDevicesAreOneReplicaOnTheWholeBatch) {
  check_data_parallel(2, 7);  // pieces of 4 and 3
}

TEST(DataParallel, ThreeCpuDevicesAreOneReplicaOnTheWholeBatch) {
  check_data_parallel(3, 7);  // 3, 3, 1
}

TEST(DataParallel, ABatchSmallerThanTheDevicesUsesFewerReplicas) {
  check_data_parallel(3, 2);
}

TEST(DataParallel, NoGradForwardStaysNoGradOnEveryReplica) {
  Net net = seeded_net();
  DataParallel<Net> dp(net, cpu_devices(3));
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(dp.forward(torch::randn({5, 6}, at::kDouble)).requires_grad());
}

TEST(DataParallel, BadDevicesAndInputsAreRefusedNamingThem) {
  Net net = seeded_net();
  try {
    DataParallel<Net> dp(net, {torch::Device(torch::kCUDA, 0)});
    if (torch::cuda::device_count() == 0) ADD_FAILURE() << "a CUDA device was accepted on a machine without one";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("device cuda:0 was given, but this process sees 0 CUDA devices"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(DataParallel<Net>(net, {}), InvalidArgument);
  EXPECT_THROW(cpu_devices(0), InvalidArgument);
  DataParallel<Net> dp(net, cpu_devices(2));
  try {
    dp.forward(torch::tensor(1.0, at::kDouble));
    ADD_FAILURE() << "a scalar was cut";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot cut an input of shape [] along dimension 0"), std::string::npos)
        << e.what();
  }
  // A replica that fails says which.
  try {
    dp.forward(torch::randn({4, 5}, at::kDouble));  // 5 features, the Linear wants 6
    ADD_FAILURE() << "a wrong shape ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DataParallel: replica 0 of 2 failed in forward"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cohort::testing
