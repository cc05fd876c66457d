// split_model: PyTorch's "distributed RNN with RPC" tutorial in C++
// (cohort/rpc.h, cohort/dist_autograd.h). A small language model is split
// over two workers: the embedding table and the decoder live on "ps",
// the LSTM on "trainer". Each step the trainer sends its tokens to ps's
// embedding, runs the LSTM on what comes back, sends the result to ps's
// decoder, computes the loss, runs distributed backward (gradients reach
// both workers' parameters) and steps a DistributedOptimizer over RRefs
// to every parameter, ps's and its own. The data: a sequence that repeats
// every 5 tokens, so the next token is learnable.
//
//   cohortrun --standalone --nproc-per-node 2 build/examples/split_model [--steps N]
//
// The trainer prints "step S/N: loss L" now and then and its first and last
// loss; it exits 1 if the loss did not halve.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cohort/dist_autograd.h"
#include "cohort/rpc.h"

using namespace cohort::rpc;
namespace dist_autograd = cohort::dist_autograd;

namespace {

constexpr int64_t kTokens = 10, kWidth = 16;

struct PsParts {
  torch::nn::Embedding embedding{kTokens, kWidth};
  torch::nn::Linear decoder{kWidth, kTokens};
  std::vector<at::Tensor> parameters() {
    auto p = embedding->parameters();
    for (auto& d : decoder->parameters()) p.push_back(d);
    return p;
  }
};

PsParts& ps() {
  static PsParts parts = [] {
    torch::manual_seed(1);
    return PsParts{};
  }();
  return parts;
}

torch::nn::LSTM& lstm() {
  static torch::nn::LSTM l = [] {
    torch::manual_seed(2);
    return torch::nn::LSTM(torch::nn::LSTMOptions(kWidth, kWidth).batch_first(true));
  }();
  return l;
}

void register_functions() {
  register_function("embed", [](const std::vector<IValue>& a) { return IValue(ps().embedding->forward(a[0].toTensor())); });
  register_function("decode", [](const std::vector<IValue>& a) { return IValue(ps().decoder->forward(a[0].toTensor())); });
  register_function("ps_parameter_count",
                    [](const std::vector<IValue>&) { return IValue(static_cast<int64_t>(ps().parameters().size())); });
  register_function("ps_parameter", [](const std::vector<IValue>& a) {
    return IValue(ps().parameters()[static_cast<size_t>(a[0].toInt())]);
  });
  register_function("lstm_parameter", [](const std::vector<IValue>& a) {
    return IValue(lstm()->parameters()[static_cast<size_t>(a[0].toInt())]);
  });
}

int train(int steps) {
  // RRefs to every parameter: ps's, and this worker's own (remote() to
  // itself makes an owner RRef of the very tensor).
  std::vector<RRef> parameters;
  const int64_t on_ps = rpc_sync("ps", "ps_parameter_count").toInt();
  for (int64_t i = 0; i < on_ps; ++i) parameters.push_back(remote("ps", "ps_parameter", {IValue(i)}));
  for (size_t i = 0; i < lstm()->parameters().size(); ++i) {
    parameters.push_back(remote("trainer", "lstm_parameter", {IValue(static_cast<int64_t>(i))}));
  }
  DistributedOptimizer::Options options;
  options.lr = 0.02;
  DistributedOptimizer optimizer(DistributedOptimizer::Kind::kAdam, parameters, options);
  torch::manual_seed(3);
  double first = 0, last = 0;
  for (int step = 1; step <= steps; ++step) {
    // 8 sequences of 12 tokens from the repeating pattern, shifted at random.
    const at::Tensor start = torch::randint(0, 5, {8, 1}, torch::kLong);
    const at::Tensor positions = start + torch::arange(13, torch::kLong).reshape({1, 13});
    const at::Tensor sequence = positions.remainder(5) * 2;  // tokens 0, 2, 4, 6, 8
    const at::Tensor input = sequence.slice(1, 0, 12), target = sequence.slice(1, 1, 13);
    dist_autograd::Context context;
    const at::Tensor embedded = rpc_sync("ps", "embed", {input}).toTensor();
    const at::Tensor hidden = std::get<0>(lstm()->forward(embedded));
    const at::Tensor logits = rpc_sync("ps", "decode", {hidden}).toTensor();
    const at::Tensor loss = torch::cross_entropy_loss(logits.reshape({-1, kTokens}), target.reshape({-1}));
    dist_autograd::backward(context.id(), {loss});
    optimizer.step(context.id());
    last = loss.item<double>();
    if (step == 1) first = last;
    if (step == 1 || step % 20 == 0 || step == steps) {
      std::printf("step %d/%d: loss %.5f\n", step, steps, last);
      std::fflush(stdout);
    }
  }
  std::printf("trainer: loss %.5f -> %.5f\n", first, last);
  return last < first / 2 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--steps") steps = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(1);
  register_functions();
  const int rank = std::atoi(std::getenv("RANK"));
  init_rpc(rank == 0 ? "trainer" : "ps");
  const int code = rank == 0 ? train(steps) : 0;
  shutdown();
  return code;
}
