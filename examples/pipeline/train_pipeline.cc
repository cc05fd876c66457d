// train_pipeline: pipeline parallel training (cohort/pipelining.h, torch's
// torch.distributed.pipelining) under cohortrun. An MLP for the demo's
// generated digits, cut into one stage per rank; each step cuts a batch
// of 64 into 8 microbatches that flow forward through the stages and back
// as the schedule orders (--schedule gpipe or 1f1b).
//
//   cohortrun --standalone --nproc-per-node 2 build/examples/train_pipeline [--schedule 1f1b] [--steps N]
//
// The last stage also trains the whole model on its own (the
// single-process reference, the same start and batches) and prints both
// losses now and then and the largest gap between them. It exits 1 if the
// gap passed 1e-3 or the loss did not halve.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cohort/data.h"
#include "cohort/distributed.h"
#include "cohort/pipelining.h"

namespace {

torch::nn::Sequential make_model() {
  return torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                               torch::nn::Linear(256, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
}

at::Tensor loss_fn(const at::Tensor& output, const at::Tensor& target) {
  return torch::cross_entropy_loss(output, target);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 150;
  std::string schedule_name = "1f1b";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--steps") steps = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--schedule") schedule_name = argv[i + 1];
  }
  torch::set_num_threads(1);
  cohort::init_process_group();
  const int rank = cohort::get_rank(), stages = cohort::get_world_size();

  // Every rank builds the whole model from one seed and keeps its part.
  torch::manual_seed(0);
  torch::nn::Sequential model = make_model();
  torch::nn::Sequential reference = make_model();
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < model->parameters().size(); ++i) reference->parameters()[i].copy_(model->parameters()[i]);
  }
  std::vector<size_t> cuts;
  for (int s = 1; s < stages; ++s) cuts.push_back(model->size() * s / stages);
  auto parts = cohort::split_sequential(model, cuts);
  cohort::PipelineStage stage(parts[rank], rank, stages);
  std::unique_ptr<cohort::PipelineSchedule> schedule;
  if (schedule_name == "gpipe") {
    schedule = std::make_unique<cohort::ScheduleGPipe>(stage, 8, loss_fn);
  } else if (schedule_name == "1f1b") {
    schedule = std::make_unique<cohort::Schedule1F1B>(stage, 8, loss_fn);
  } else {
    std::fprintf(stderr, "train_pipeline: --schedule is gpipe or 1f1b, not '%s'\n", schedule_name.c_str());
    return 2;
  }
  torch::optim::SGD optimizer(parts[rank]->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD ref_opt(reference->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));

  const cohort::Dataset train = cohort::synthetic_mnist(4096, 1);
  const int64_t batch = 64;
  double first = 0, last = 0, gap = 0;
  for (int step = 1; step <= steps; ++step) {
    const int64_t at = ((step - 1) * batch) % (train.size() - batch);
    const at::Tensor x = train.images.slice(0, at, at + batch), y = train.labels.slice(0, at, at + batch);
    optimizer.zero_grad();
    if (!stage.is_last()) {
      schedule->step(stage.is_first() ? x : at::Tensor());
      optimizer.step();
      continue;
    }
    const auto losses = schedule->step_last(y, stage.is_first() ? x : at::Tensor());
    optimizer.step();
    double mean = 0;
    for (const auto& l : losses) mean += l.item<double>() / losses.size();
    ref_opt.zero_grad();
    const at::Tensor ref_loss = loss_fn(reference->forward(x), y);
    ref_loss.backward();
    ref_opt.step();
    last = mean;
    if (step == 1) first = last;
    gap = std::max(gap, std::abs(last - ref_loss.item<double>()));
    if (step == 1 || step % 50 == 0 || step == steps) {
      std::printf("step %d/%d: loss %.5f (one process: %.5f)\n", step, steps, last, ref_loss.item<double>());
      std::fflush(stdout);
    }
  }
  int code = 0;
  if (stage.is_last()) {
    std::printf("%s over %d stages, 8 microbatches: loss %.5f -> %.5f, largest gap to one process %.2e\n",
                schedule_name.c_str(), stages, first, last, gap);
    code = gap <= 1e-3 && last < first / 2 ? 0 : 1;
  }
  cohort::destroy_process_group();
  return code;
}
