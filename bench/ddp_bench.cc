// ddp_bench: the step time of DistributedDataParallel with and without
// gradient synchronisation (no_sync), whose difference is DDP's overhead.
// bench/ddp_bench_torch.py is its twin on torch's DDP over Gloo;
// bench/compare_ddp.sh runs both side by side. Launch with env:// (cohortrun).
//
//   ddp_bench --model mlp|cnn --batch 64 --steps 60
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cohort/ddp.h"
#include "cohort/distributed.h"

namespace {

// The tutorial's CNN.
struct CnnImpl : torch::nn::Module {
  CnnImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 10, 5)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(10, 20, 5)))),
        fc1(register_module("fc1", torch::nn::Linear(320, 50))),
        fc2(register_module("fc2", torch::nn::Linear(50, 10))) {}
  at::Tensor forward(at::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1(x), 2));
    x = torch::relu(torch::max_pool2d(conv2(x), 2));
    x = torch::relu(fc1(x.view({-1, 320})));
    return torch::log_softmax(fc2(x), 1);
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Cnn);

// A 784-2048-2048-10 MLP (5.8M parameters).
struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(784, 2048))),
        fc2(register_module("fc2", torch::nn::Linear(2048, 2048))),
        fc3(register_module("fc3", torch::nn::Linear(2048, 10))) {}
  at::Tensor forward(at::Tensor x) {
    x = torch::relu(fc1(x.view({x.size(0), 784})));
    x = torch::relu(fc2(x));
    return torch::log_softmax(fc3(x), 1);
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <class Model>
void run(Model model, int batch, int steps, const cohort::DDPOptions& options, bool set_to_none) {
  cohort::DistributedDataParallel<Model> ddp(model, options);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  at::Tensor x = torch::randn({batch, 1, 28, 28});
  at::Tensor y = torch::randint(0, 10, {batch}, torch::kInt64);
  auto step = [&] {
    opt.zero_grad(set_to_none);
    torch::nll_loss(ddp.forward(x), y).backward();
    opt.step();
  };
  // Synchronised and no_sync steps alternate, each timed alone; the
  // medians resist this shared machine's bursts of noise better than means.
  // Every step starts together (an untimed barrier first): otherwise a rank
  // that ran its no_sync step slower makes the others wait for it in the
  // next synchronised step, and that lag, which is no cost of DDP's (the
  // cores here differ in speed by up to 20% from one minute to the next),
  // would count as DDP's overhead.
  std::vector<double> sync_ms, local_ms;
  for (int w = 0; w < 5; ++w) step();
  const cohort::DDPStats before = ddp.stats();
  for (int s = 0; s < steps; ++s) {
    cohort::barrier();
    auto t0 = std::chrono::steady_clock::now();
    step();
    auto t1 = std::chrono::steady_clock::now();
    cohort::barrier();
    auto t2 = std::chrono::steady_clock::now();
    {
      auto guard = ddp.no_sync();
      step();
    }
    auto t3 = std::chrono::steady_clock::now();
    sync_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    local_ms.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
  }
  // Where the synchronised steps' extra time went, per step: from the first
  // bucket's launch to the last one's completion, and the part of it
  // backward's end had to wait for (exposed).
  const cohort::DDPStats after = ddp.stats();
  const double n = static_cast<double>(after.iterations - before.iterations);
  // Rank 0 reports the slower rank's numbers (the job runs at its pace).
  double result[4] = {median(sync_ms), median(local_ms), 1e3 * (after.comm_seconds - before.comm_seconds) / n,
                      1e3 * (after.exposed_seconds - before.exposed_seconds) / n};
  cohort::AllReduceOptions o;
  o.op = cohort::ReduceOp::MAX;
  cohort::all_reduce(cohort::Buffer::of(result, 4), o);
  if (cohort::get_rank() == 0) {
    std::printf(
        "ddp_bench cohort%s world=%d batch=%d sync_ms=%.2f no_sync_ms=%.2f overhead_ms=%.2f comm_ms=%.2f "
        "exposed_ms=%.2f buckets=%zu\n",
        options.gradient_as_bucket_view ? "+view" : "", cohort::get_world_size(), batch, result[0], result[1],
        result[0] - result[1], result[2], result[3], after.bucket_bytes.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "mlp";
  int batch = 64, steps = 60;
  CLI::App app{"DDP step time with and without gradient synchronisation"};
  app.add_option("--model", model, "mlp (784-2048-2048-10) or cnn (the tutorial's)")
      ->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--batch", batch, "samples per rank")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "synchronised steps, each followed by a no_sync one")
      ->check(CLI::PositiveNumber);
  cohort::DDPOptions options;
  app.add_flag("--gradient-as-bucket-view", options.gradient_as_bucket_view,
               "DDPOptions::gradient_as_bucket_view");
  // torch 2.x's zero_grad drops the gradients (set_to_none=True) unless
  // told otherwise; 1.13's zeroed them in place.
  std::string zero_grad = "none";
  app.add_option("--zero-grad", zero_grad, "none (drop the gradients: torch 2.x's default) or in-place")
      ->check(CLI::IsMember({"none", "in-place"}));
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(1);
  torch::manual_seed(0);
  cohort::init_process_group();
  if (model == "mlp") {
    run(Mlp(), batch, steps, options, zero_grad == "none");
  } else {
    run(Cnn(), batch, steps, options, zero_grad == "none");
  }
  cohort::destroy_process_group();
}
