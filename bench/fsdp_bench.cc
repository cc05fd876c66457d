// fsdp_bench: cohort's fully_shard (cohort/fsdp.h) step time, the C++
// counterpart of bench/python/fsdp_step.py (torch's fully_shard): the MLP
// 784-2048-2048-10, each Linear its own unit and the root last, SGD with
// momentum, one thread per rank, the same batch every step. Run it under
// cohortrun (env://). Prints one line on rank 0:
//   fsdp_bench cohort-cpp world=P batch=B step_ms=median (the slowest rank's)
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/fsdp.h"
#include "cohort/tensor.h"

int main(int argc, char** argv) {
  int batch = 64, steps = 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--batch") == 0) batch = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
  }
  at::set_num_threads(1);
  torch::manual_seed(0);
  cohort::init_process_group();
  cohort::FullyShardOptions options;
  options.mesh = cohort::init_device_mesh("cpu", {cohort::get_world_size()});
  // One statement a layer: each draws from the generator, in this order.
  auto first = cohort::fully_shard(torch::nn::Linear(784, 2048), options);
  auto second = cohort::fully_shard(torch::nn::Linear(2048, 2048), options);
  auto third = cohort::fully_shard(torch::nn::Linear(2048, 10), options);
  auto model = cohort::fully_shard(
      torch::nn::Sequential(torch::nn::Flatten(), first, torch::nn::ReLU(), second, torch::nn::ReLU(), third),
      options);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const at::Tensor x = torch::randn({batch, 1, 28, 28});
  const at::Tensor y = torch::randint(0, 10, {batch});
  auto step = [&] {
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
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
  at::Tensor median = torch::tensor({times[times.size() / 2]}, at::kDouble);
  cohort::all_reduce(median, cohort::ReduceOp::MAX);
  if (cohort::get_rank() == 0) {
    std::printf("fsdp_bench cohort-cpp world=%d batch=%d step_ms=%.2f\n", cohort::get_world_size(), batch,
                median.item<double>());
  }
  cohort::destroy_process_group();
  return 0;
}
