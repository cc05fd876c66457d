// train_fsdp: training with FSDP (cohort/fsdp.h, torch's fully_shard) under
// cohortrun. Between steps each rank holds only its rows of every
// parameter; a unit's parameters are gathered whole for its forward and
// backward, and its gradients are reduce-scattered back into the shards.
//
//   cohortrun --standalone --nproc-per-node 2 build/examples/train_fsdp               # digits
//   cohortrun --standalone --nproc-per-node 2 build/examples/train_fsdp --model mlp   # 8 MLP blocks
//
// mnist (the default): train_mnist's network on the same generated digits,
// a unit per layer with parameters. mlp: 8 feed-forward blocks of a
// transformer (d = 256, 4.2M parameters), a unit per block, on random
// regression data. At the end rank 0 prints what sharding saved.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cohort/data.h"
#include "cohort/device_mesh.h"
#include "cohort/distributed.h"
#include "cohort/elastic.h"
#include "cohort/fsdp.h"
#include "cohort/tensor.h"

namespace {

// Unit<M> is a module M made one FSDP unit by cohort::fully_shard.
template <class M>
using Unit = std::shared_ptr<cohort::FullyShardImpl<M>>;

struct Args {
  std::string model = "mnist";
  int epochs = 2;       // mnist
  int steps = 200;      // mlp
  int batch_size = 64;  // per rank
  double lr = 0;        // 0: the model's default
  bool mixed_precision = false;
  bool no_reshard_after_forward = false;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// mean_over_ranks averages `value` over every rank (a collective).
double mean_over_ranks(double value) {
  at::Tensor t = torch::full({1}, value, torch::kFloat64);
  cohort::all_reduce(t, cohort::ReduceOp::AVG);
  return t.item<double>();
}

// report_memory prints, on rank 0, the bytes of parameters this rank holds
// between steps against the whole model's: what sharding saves (the
// optimizer's state, made from the shards, shrinks the same way).
// full_state_dict gathers every parameter, so every rank calls it.
void report_memory(torch::nn::Module& model) {
  int64_t held = 0, whole = 0;
  for (const at::Tensor& p : model.parameters()) held += p.numel() * p.element_size();
  for (const auto& entry : cohort::full_state_dict(model))
    whole += entry.second.numel() * entry.second.element_size();
  if (cohort::get_rank() == 0) {
    std::printf("rank 0 holds %lld bytes of parameters between steps; the whole model has %lld (%.1f%%)\n",
                static_cast<long long>(held), static_cast<long long>(whole), 100.0 * held / whole);
  }
}

// Net is train_mnist's network (the PyTorch tutorial's) with each of its
// four layers with parameters an FSDP unit; pooling, ReLU and dropout hold
// nothing to shard.
struct NetImpl : torch::nn::Module {
  explicit NetImpl(const cohort::FullyShardOptions& o) {
    // One layer per statement, in the same order on every rank: each layer
    // draws its initial values from torch's generator, and C++ leaves open
    // the order in which the arguments of one call are evaluated.
    conv1 = register_module("conv1",
                            cohort::fully_shard(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 10, 5)), o));
    conv2 = register_module("conv2",
                            cohort::fully_shard(torch::nn::Conv2d(torch::nn::Conv2dOptions(10, 20, 5)), o));
    conv2_drop = register_module("conv2_drop", torch::nn::Dropout2d());
    fc1 = register_module("fc1", cohort::fully_shard(torch::nn::Linear(320, 50), o));
    fc2 = register_module("fc2", cohort::fully_shard(torch::nn::Linear(50, 10), o));
  }

  at::Tensor forward(at::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop(conv2->forward(x)), 2));
    x = torch::relu(fc1->forward(x.view({-1, 320})));
    x = torch::dropout(x, 0.5, is_training());
    return torch::log_softmax(fc2->forward(x), 1);
  }

  Unit<torch::nn::Conv2d> conv1, conv2;
  torch::nn::Dropout2d conv2_drop{nullptr};
  Unit<torch::nn::Linear> fc1, fc2;
};
TORCH_MODULE(Net);

// accuracy is the fraction of `test` the model classifies right. Each rank
// scores an equal share (drop_last leaves out fewer samples than ranks) in
// the same number of batches: a sharded forward gathers parameters, so
// every rank must run as many forwards as the others.
double accuracy(const Unit<Net>& model, const cohort::Dataset& test) {
  torch::NoGradGuard no_grad;  // no backward to come: each unit frees its parameters after its forward
  model->eval();
  cohort::DistributedSampler share(test.size(), -1, -1, /*shuffle=*/false, 0, /*drop_last=*/true);
  const at::Tensor mine = torch::tensor(share.indices(), torch::kInt64);
  at::Tensor counts = torch::zeros({2}, torch::kInt64);
  for (int64_t start = 0; start < mine.size(0); start += 1000) {
    const at::Tensor idx = mine.slice(0, start, std::min<int64_t>(start + 1000, mine.size(0)));
    const at::Tensor predicted = model->forward(test.images.index_select(0, idx)).argmax(1);
    counts[0] += predicted.eq(test.labels.index_select(0, idx)).sum();
    counts[1] += idx.size(0);
  }
  cohort::all_reduce(counts);
  model->train();
  return counts[0].item<double>() / counts[1].item<double>();
}

void train_digits(const Args& a, const cohort::FullyShardOptions& units,
                  const cohort::FullyShardOptions& root) {
  const int rank = cohort::get_rank(), world = cohort::get_world_size();
  const cohort::Dataset train = cohort::synthetic_mnist(60000, 1234);  // train_mnist's defaults
  const cohort::Dataset test = cohort::synthetic_mnist(10000, 1235);

  // Every rank starts from the same values, as fully_shard expects; the
  // layers' units are made first (inside Net), the root last. The
  // optimizer gets this rank's shards.
  torch::manual_seed(0);
  Net net(units);
  Unit<Net> model = cohort::fully_shard(net, root);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(a.lr > 0 ? a.lr : 0.03).momentum(0.5));

  cohort::DistributedSampler sampler(train.size(), world, rank, /*shuffle=*/true, 1234);
  const int64_t steps = (sampler.size() + a.batch_size - 1) / a.batch_size;  // the same on every rank
  for (int epoch = 0; epoch < a.epochs; ++epoch) {
    const auto t_epoch = std::chrono::steady_clock::now();
    sampler.set_epoch(epoch);
    const at::Tensor order = torch::tensor(sampler.indices(), torch::kInt64);
    double loss_sum = 0;
    for (int64_t step = 0; step < steps; ++step) {
      const at::Tensor idx =
          order.slice(0, step * a.batch_size, std::min<int64_t>((step + 1) * a.batch_size, order.size(0)));
      optimizer.zero_grad();
      // forward gathers each unit in turn; backward gathers them again and
      // reduce-scatters the gradients into the shards, averaged over ranks.
      at::Tensor loss = torch::nll_loss(model->forward(train.images.index_select(0, idx)),
                                        train.labels.index_select(0, idx));
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
    }
    const double loss = mean_over_ranks(loss_sum / static_cast<double>(steps));
    const double acc = accuracy(model, test);
    if (rank == 0) {
      std::printf("epoch %d/%d: loss %.4f, test accuracy %.2f%% (%.1f s)\n", epoch + 1, a.epochs, loss,
                  100 * acc, seconds_since(t_epoch));
    }
  }
  report_memory(*model);
}

// Block is a transformer's feed-forward layer: x + W2 gelu(W1 x), W1 from d
// to 4d, W2 back. The residual lets eight of them in a row learn quickly;
// without it the 16 layers pass little signal at the start.
struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(int64_t d) {
    up = register_module("up", torch::nn::Linear(d, 4 * d));  // one layer per statement (see Net)
    down = register_module("down", torch::nn::Linear(4 * d, d));
  }
  at::Tensor forward(const at::Tensor& x) { return x + down(torch::gelu(up(x))); }

  torch::nn::Linear up{nullptr}, down{nullptr};
};
TORCH_MODULE(Block);

void train_mlp(const Args& a, const cohort::FullyShardOptions& units, const cohort::FullyShardOptions& root) {
  constexpr int64_t kWidth = 256, kBlocks = 8;
  const int rank = cohort::get_rank();

  torch::manual_seed(0);
  torch::nn::Sequential blocks;
  for (int64_t i = 0; i < kBlocks; ++i) {
    Block block(kWidth);
    blocks->push_back(cohort::fully_shard(block, units));  // a unit each,
  }
  Unit<torch::nn::Sequential> model = cohort::fully_shard(blocks, root);  // the root last
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(a.lr > 0 ? a.lr : 1e-3));

  // The task: y = x A for a fixed random A, the same on every rank. Each
  // rank draws its own x, as each data-parallel rank reads its own batch.
  torch::manual_seed(1);
  const at::Tensor teacher = torch::randn({kWidth, kWidth}) / std::sqrt(static_cast<double>(kWidth));
  torch::manual_seed(2 + static_cast<uint64_t>(rank));

  const int every = std::max(a.steps / 10, 1);
  double loss_sum = 0;
  auto t_window = std::chrono::steady_clock::now();
  for (int step = 1; step <= a.steps; ++step) {
    const at::Tensor x = torch::randn({a.batch_size, kWidth});
    optimizer.zero_grad();
    at::Tensor loss = torch::mse_loss(model->forward(x), x.matmul(teacher));
    loss.backward();
    optimizer.step();
    loss_sum += loss.item<double>();
    if (step % every == 0 || step == a.steps) {
      const int window = step % every == 0 ? every : step % every;
      const double mean = mean_over_ranks(loss_sum / window);  // every rank takes part
      if (rank == 0) {
        std::printf("step %d/%d: loss %.4f (%.1f ms a step)\n", step, a.steps, mean,
                    1000 * seconds_since(t_window) / window);
      }
      loss_sum = 0;
      t_window = std::chrono::steady_clock::now();
    }
  }
  report_memory(*model);
}

}  // namespace

int run(int argc, char** argv) {
  Args a;
  CLI::App app{"Training sharded with cohort's FSDP (torch's fully_shard)"};
  app.add_option("--model", a.model, "mnist (train_mnist's network, generated digits) or mlp (8 blocks)")
      ->check(CLI::IsMember({"mnist", "mlp"}));
  app.add_option("--epochs", a.epochs, "epochs to train (mnist)")->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps, "steps to train (mlp)")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", a.batch_size, "samples per rank per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", a.lr, "learning rate (default: SGD 0.03 for mnist, Adam 0.001 for mlp)");
  app.add_flag("--mixed-precision", a.mixed_precision,
               "bf16 parameters in forward and backward, fp32 reduction");
  app.add_flag("--no-reshard-after-forward", a.no_reshard_after_forward,
               "keep each unit's parameters gathered from its forward to its backward");
  CLI11_PARSE(app, argc, argv);

  if (!std::getenv("OMP_NUM_THREADS")) at::set_num_threads(1);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time through cohortrun's pipe
  cohort::init_process_group();              // env://, as cohortrun sets it
  const int world = cohort::get_world_size();

  // Every unit shards over all ranks (a 1-D mesh). The root also casts its
  // output back to fp32, so that the loss is computed in fp32.
  cohort::FullyShardOptions units;
  units.mesh = cohort::init_device_mesh("cpu", {world});
  units.reshard_after_forward = !a.no_reshard_after_forward;
  if (a.mixed_precision) {
    units.mp_policy.param_dtype = at::kBFloat16;
    units.mp_policy.reduce_dtype = at::kFloat;
  }
  cohort::FullyShardOptions root = units;
  if (a.mixed_precision) root.mp_policy.output_dtype = at::kFloat;

  if (cohort::get_rank() == 0) {
    std::printf("%d ranks, model %s, %s, reshard after forward %s\n", world, a.model.c_str(),
                a.mixed_precision ? "bf16 compute, fp32 reduction" : "fp32",
                units.reshard_after_forward ? "on" : "off");
  }
  if (a.model == "mnist") {
    train_digits(a, units, root);
  } else {
    train_mlp(a, units, root);
  }
  cohort::destroy_process_group();
  return 0;
}

// An exception that ends the run is written to the launcher's error file,
// so that cohortrun's summary names it as the root cause.
int main(int argc, char** argv) {
  return cohort::record_errors([&] { return run(argc, argv); });
}
