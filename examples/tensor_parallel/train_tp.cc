// train_tp: tensor parallel training (cohort/tensor_parallel.h, torch's
// parallelize_module) under cohortrun. An MLP for the demo's generated
// digits, its first Linear cut column-wise and its second row-wise over
// every rank (Megatron-LM's pair: one all_reduce forward, one backward);
// every rank sees the same batches, as tensor parallelism needs.
//
//   cohortrun --standalone --nproc-per-node 2 build/examples/train_tp [--steps N]
//
// Beside it, each rank trains the whole model the same way on its own (the
// single-process reference): rank 0 prints both losses now and then, the
// largest gap between them, and the held-out accuracy. It exits 1 if the
// gap passed 1e-3 (float sums in another order, nothing more) or the loss
// did not halve.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cohort/data.h"
#include "cohort/device_mesh.h"
#include "cohort/distributed.h"
#include "cohort/tensor_parallel.h"

int main(int argc, char** argv) {
  int steps = 150;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--steps") steps = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(1);
  cohort::init_process_group();
  const int rank = cohort::get_rank(), world = cohort::get_world_size();
  auto mesh = cohort::init_device_mesh("cpu", {world});

  // The whole model, the same on every rank (one seed): the reference, and
  // what parallelize_module cuts this rank's shards from.
  torch::manual_seed(0);
  torch::nn::Sequential whole(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 10));
  torch::nn::Sequential reference(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                                  torch::nn::Linear(256, 10));
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < whole->parameters().size(); ++i) reference->parameters()[i].copy_(whole->parameters()[i]);
  }
  auto tp = cohort::parallelize_module(whole, mesh, {{"1", cohort::ColwiseParallel()}, {"3", cohort::RowwiseParallel()}});
  torch::optim::SGD tp_opt(tp->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD ref_opt(reference->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));

  const cohort::Dataset train = cohort::synthetic_mnist(4096, 1), held_out = cohort::synthetic_mnist(1000, 2);
  const int64_t batch = 64;
  double first = 0, last = 0, gap = 0;
  for (int step = 1; step <= steps; ++step) {
    const int64_t at = ((step - 1) * batch) % (train.size() - batch);
    const at::Tensor x = train.images.slice(0, at, at + batch), y = train.labels.slice(0, at, at + batch);
    tp_opt.zero_grad();
    const at::Tensor loss = torch::cross_entropy_loss(tp->forward(x), y);
    loss.backward();
    tp_opt.step();
    ref_opt.zero_grad();
    const at::Tensor ref_loss = torch::cross_entropy_loss(reference->forward(x), y);
    ref_loss.backward();
    ref_opt.step();
    last = loss.item<double>();
    if (step == 1) first = last;
    gap = std::max(gap, std::abs(last - ref_loss.item<double>()));
    if (rank == 0 && (step == 1 || step % 50 == 0 || step == steps)) {
      std::printf("step %d/%d: loss %.5f (one process: %.5f)\n", step, steps, last, ref_loss.item<double>());
      std::fflush(stdout);
    }
  }
  torch::NoGradGuard no_grad;
  const double accuracy =
      tp->forward(held_out.images).argmax(1).eq(held_out.labels).to(torch::kDouble).mean().item<double>() * 100;
  if (rank == 0) {
    std::printf("tensor parallel over %d ranks: loss %.5f -> %.5f, largest gap to one process %.2e, "
                "held-out accuracy %.1f%%\n",
                world, first, last, gap, accuracy);
  }
  cohort::destroy_process_group();
  return gap <= 1e-3 && last < first / 2 ? 0 : 1;
}
