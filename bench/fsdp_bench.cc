// fsdp_bench: cohort's fully_shard (cohort/fsdp.h) against cohort's DDP on
// the same model, and the C++ counterpart of bench/python/fsdp_step.py
// (torch's fully_shard): the MLP 784-2048-2048-10 (5.8M parameters), each
// Linear its own unit and the root last, SGD with momentum, one thread per
// rank, the same batch every step. Run it under cohortrun (env://).
// --mode tp cuts the same MLP for tensor parallelism instead (the first
// Linear column-wise, the second row-wise: one all_reduce forward, one
// backward; the last, 10 outputs, whole on every rank), the same batch on
// every rank; --mode single runs the whole model without a collective
// (the one-process step tp is measured against; launch it with one rank).
// Prints one line on rank 0 (the slowest rank's numbers):
//   fsdp_bench cohort-cpp|cohort-cpp-keep|cohort-ddp|cohort-tp|single world=P batch=B step_ms=median peak_mb=M held_mb=H
// Memory is measured, not computed, as the growth of the process's
// resident memory from just before the model is made: peak_mb of its
// high-water mark (VmHWM) by the end of the timed steps (parameters,
// gradients, optimizer state, and whatever a step holds at its peak:
// gathered units, buckets, activations), held_mb of its resident size
// (VmRSS) between steps (what stays: parameters, gradients, optimizer
// state). Large blocks are mmapped and unmapped when freed (a fixed
// M_MMAP_THRESHOLD) in runs with --memory, so that freed memory leaves
// the resident size; times come from runs without it (mmapping every
// large block costs page faults the program would not otherwise pay).
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cohort/ddp.h"
#include "cohort/distributed.h"
#include "cohort/fsdp.h"
#include "cohort/tensor.h"
#include "cohort/tensor_parallel.h"

namespace {

// status_mb reads one of /proc/self/status's sizes (VmHWM, VmRSS), in MiB.
double status_mb(const std::string& what) {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == what + ":") {
      double kb = 0;
      status >> kb;
      return kb / 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

// Layers, one statement each: each draws from the generator, in order.
struct Layers {
  torch::nn::Linear first{784, 2048}, second{2048, 2048}, third{2048, 10};
};

torch::nn::Sequential plain(const Layers& l) {
  return torch::nn::Sequential(torch::nn::Flatten(), l.first, torch::nn::ReLU(), l.second, torch::nn::ReLU(),
                               l.third);
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 64, steps = 30;
  std::string mode = "fsdp";
  bool memory = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--batch") == 0) batch = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
  }
  bool keep_whole = false;  // --no-reshard-after-forward
  for (int i = 1; i < argc; ++i) {
    memory = memory || std::strcmp(argv[i], "--memory") == 0;
    keep_whole = keep_whole || std::strcmp(argv[i], "--no-reshard-after-forward") == 0;
  }
  at::set_num_threads(1);
  if (memory) mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  cohort::init_process_group();
  const at::Tensor x = torch::randn({batch, 1, 28, 28});
  const at::Tensor y = torch::randint(0, 10, {batch});
  const double baseline = status_mb("VmRSS");
  torch::manual_seed(0);
  Layers layers;
  std::function<at::Tensor(const at::Tensor&)> forward;
  std::vector<at::Tensor> parameters;
  std::shared_ptr<torch::nn::Module> keep;
  std::shared_ptr<cohort::DistributedDataParallel<torch::nn::Sequential>> ddp;
  if (mode == "single") {
    auto model = plain(layers);
    forward = [model](const at::Tensor& in) mutable { return model->forward(in); };
    parameters = model->parameters();
  } else if (mode == "tp") {
    auto mesh = cohort::init_device_mesh("cpu", {cohort::get_world_size()});
    auto model = cohort::parallelize_module(plain(layers), mesh,
                                            {{"1", cohort::ColwiseParallel()}, {"3", cohort::RowwiseParallel()}});
    forward = [model](const at::Tensor& in) mutable { return model->forward(in); };
    parameters = model->parameters();
  } else if (mode == "ddp") {
    auto model = plain(layers);
    ddp = std::make_shared<cohort::DistributedDataParallel<torch::nn::Sequential>>(model);
    forward = [ddp](const at::Tensor& in) { return ddp->forward(in); };
    parameters = model->parameters();
  } else {
    cohort::FullyShardOptions options;
    options.mesh = cohort::init_device_mesh("cpu", {cohort::get_world_size()});
    options.reshard_after_forward = !keep_whole;
    auto first = cohort::fully_shard(layers.first, options);
    auto second = cohort::fully_shard(layers.second, options);
    auto third = cohort::fully_shard(layers.third, options);
    auto model = cohort::fully_shard(torch::nn::Sequential(torch::nn::Flatten(), first, torch::nn::ReLU(),
                                                           second, torch::nn::ReLU(), third),
                                     options);
    keep = model;
    forward = [model](const at::Tensor& in) mutable { return model->forward(in); };
    parameters = model->parameters();
  }
  torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(0.01).momentum(0.9));
  auto step = [&] {
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(forward(x), y).backward();
    optimizer.step();
  };
  for (int i = 0; i < 3; ++i) step();
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    cohort::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  at::Tensor result = torch::tensor(
      {times[times.size() / 2], status_mb("VmHWM") - baseline, status_mb("VmRSS") - baseline}, at::kDouble);
  cohort::all_reduce(result, cohort::ReduceOp::MAX);
  if (cohort::get_rank() == 0) {
    std::printf("fsdp_bench %s world=%d batch=%d step_ms=%.2f peak_mb=%.1f held_mb=%.1f\n",
                mode == "single" ? "single"
                : mode == "tp"   ? "cohort-tp"
                : mode == "ddp"  ? "cohort-ddp"
                : keep_whole  ? "cohort-cpp-keep"
                              : "cohort-cpp",
                cohort::get_world_size(), batch, result[0].item<double>(), result[1].item<double>(),
                result[2].item<double>());
  }
  cohort::destroy_process_group();
  return 0;
}
