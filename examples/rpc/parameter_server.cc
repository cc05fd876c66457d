// parameter_server: PyTorch's "batch-updating parameter server" RPC
// tutorial in C++ (cohort/rpc.h). Rank 0 is the server: it holds the
// model's parameters and an SGD step. Ranks 1.. are trainers, each with a
// copy of the model: every step a trainer computes its gradients on its
// own batch and calls the server's "update_and_fetch" with them. That is
// an async function: the call holds no server thread while it waits for
// the other trainers; once every trainer's gradients are in, the server
// averages them, steps, and answers every trainer at once with the new
// parameters, which each copies into its model. The data: a regression
// y = sin(x . w) on synthetic inputs, one stream per trainer.
//
//   cohortrun --standalone --nproc-per-node 3 build/examples/parameter_server [--steps N]
//
// Each trainer prints "trainer R step S/N: loss L" now and then and, last,
// its first and last loss; a trainer whose loss did not halve exits 1.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "cohort/rpc.h"

using namespace cohort::rpc;

namespace {

constexpr int64_t kInputs = 8;

torch::nn::Sequential make_model() {
  torch::manual_seed(0);  // every process builds the same starting model
  return torch::nn::Sequential(torch::nn::Linear(kInputs, 32), torch::nn::Tanh(), torch::nn::Linear(32, 1));
}

std::vector<IValue> values_of(const torch::nn::Sequential& m) {
  std::vector<IValue> out;
  for (const auto& p : m->parameters()) out.emplace_back(p.detach().clone());
  return out;
}

// The server's state: its model, and the round of updates in progress.
struct Server {
  std::mutex mu;
  torch::nn::Sequential model = make_model();
  std::unique_ptr<torch::optim::SGD> sgd;
  int trainers = 0;
  int arrived = 0;
  std::vector<at::Tensor> sums;
  FuturePtr round = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get());
};

Server& server() {
  static Server s;
  return s;
}

void register_server_functions() {
  register_function("fetch", [](const std::vector<IValue>&) {
    std::lock_guard<std::mutex> lock(server().mu);
    return IValue(c10::ivalue::Tuple::create(values_of(server().model)));
  });
  register_async_function("update_and_fetch", [](const std::vector<IValue>& a) {
    Server& s = server();
    std::lock_guard<std::mutex> lock(s.mu);
    auto grads = a[0].toList();
    if (s.sums.empty()) {
      for (const IValue& g : grads) s.sums.push_back(g.toTensor().clone());
    } else {
      for (size_t i = 0; i < s.sums.size(); ++i) s.sums[i] += grads.get(i).toTensor();
    }
    FuturePtr mine = s.round;
    if (++s.arrived < s.trainers) return mine;  // answered when the last one comes
    auto params = s.model->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = s.sums[i] / s.trainers;
    s.sgd->step();
    s.sums.clear();
    s.arrived = 0;
    s.round = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get());
    mine->markCompleted(IValue(c10::ivalue::Tuple::create(values_of(s.model))));
    return mine;
  });
}

void load(torch::nn::Sequential& model, const IValue& values) {
  torch::NoGradGuard no_grad;
  auto params = model->parameters();
  const auto v = values.toTupleRef().elements().asArrayRef();
  for (size_t i = 0; i < params.size(); ++i) params[i].copy_(v[i].toTensor());
}

int train(int rank, int steps) {
  torch::nn::Sequential model = make_model();
  load(model, rpc_sync("server", "fetch"));
  torch::manual_seed(100 + rank);
  const at::Tensor truth = torch::linspace(-1, 1, kInputs).reshape({kInputs, 1});
  double first = 0, last = 0;
  for (int step = 1; step <= steps; ++step) {
    const at::Tensor x = torch::randn({64, kInputs});
    const at::Tensor loss = torch::mse_loss(model->forward(x), torch::sin(torch::matmul(x, truth)));
    model->zero_grad();
    loss.backward();
    c10::impl::GenericList grads(c10::AnyType::get());
    for (const auto& p : model->parameters()) grads.push_back(p.grad());
    load(model, rpc_sync("server", "update_and_fetch", {IValue(grads)}));
    last = loss.item<double>();
    if (step == 1) first = last;
    if (step == 1 || step % 20 == 0 || step == steps) {
      std::printf("trainer %d step %d/%d: loss %.5f\n", rank, step, steps, last);
      std::fflush(stdout);
    }
  }
  std::printf("trainer %d: loss %.5f -> %.5f\n", rank, first, last);
  return last < first / 2 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--steps") steps = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(1);
  const int rank = std::atoi(std::getenv("RANK"));
  const int world = std::atoi(std::getenv("WORLD_SIZE"));
  if (rank == 0) {
    server().trainers = world - 1;
    server().sgd = std::make_unique<torch::optim::SGD>(server().model->parameters(), torch::optim::SGDOptions(0.2));
  }
  register_server_functions();
  init_rpc(rank == 0 ? "server" : "trainer" + std::to_string(rank));
  const int code = rank == 0 ? 0 : train(rank, steps);
  shutdown();  // the server stays until every trainer is done
  return code;
}
