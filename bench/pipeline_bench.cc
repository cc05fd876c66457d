// pipeline_bench: a pipeline step's time and measured bubble per stage,
// cohort's schedules (cohort/pipelining.h) on an MLP stack (LAYERS
// Linear(WIDTH, WIDTH) + ReLU, cut evenly into one stage per rank, or two
// per rank for interleaved), batch BATCH cut into MICROBATCHES, SGD. Run
// under cohortrun (env://). The bubble of a rank is the part of its step
// spent waiting for a peer (receives and the end of its sends), measured
// by the schedule; the theory for GPipe and 1F1B is (p - 1) / (m + p - 1),
// for interleaved with v stages a rank (p - 1) / (v m + p - 1). Prints,
// from rank 0:
//   pipeline_bench <schedule> stages=P microbatches=M step_ms=median
//   samples_per_s=S bubble=max-over-stages theory=T
//
//   pipeline_bench [--schedule gpipe|1f1b|interleaved] [--microbatches M] [--batch B]
//                  [--width W] [--layers L] [--steps N]
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/pipelining.h"
#include "cohort/tensor.h"

using namespace cohort;

int main(int argc, char** argv) {
  std::string schedule_name = "1f1b";
  int microbatches = 8, batch = 64, width = 512, layers = 8, steps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--schedule") schedule_name = value;
    else if (flag == "--microbatches") microbatches = std::atoi(value);
    else if (flag == "--batch") batch = std::atoi(value);
    else if (flag == "--width") width = std::atoi(value);
    else if (flag == "--layers") layers = std::atoi(value);
    else if (flag == "--steps") steps = std::atoi(value);
    else {
      std::fprintf(stderr, "pipeline_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  at::set_num_threads(1);
  init_process_group();
  const int p = get_world_size(), rank = get_rank();
  torch::manual_seed(0);
  torch::nn::Sequential model;
  for (int l = 0; l < layers; ++l) {
    model->push_back(torch::nn::Linear(width, width));
    model->push_back(torch::nn::ReLU());
  }
  const int per_rank = schedule_name == "interleaved" ? 2 : 1, stages = per_rank * p;
  std::vector<size_t> cuts;
  for (int s = 1; s < stages; ++s) cuts.push_back(static_cast<size_t>(2 * layers * s / stages));
  auto parts = split_sequential(model, cuts);
  std::vector<std::unique_ptr<PipelineStage>> held_stages;
  std::vector<PipelineStage*> pointers;
  std::vector<at::Tensor> parameters;
  for (int s = rank; s < stages; s += p) {
    held_stages.push_back(std::make_unique<PipelineStage>(parts[static_cast<size_t>(s)], s, stages));
    pointers.push_back(held_stages.back().get());
    for (const auto& t : parts[static_cast<size_t>(s)]->parameters()) parameters.push_back(t);
  }
  auto loss = [](const at::Tensor& out, const at::Tensor& target) { return torch::mse_loss(out, target); };
  std::unique_ptr<PipelineSchedule> schedule;
  if (schedule_name == "gpipe") {
    schedule = std::make_unique<ScheduleGPipe>(*pointers[0], microbatches, loss);
  } else if (schedule_name == "interleaved") {
    schedule = std::make_unique<ScheduleInterleaved1F1B>(pointers, microbatches, loss);
  } else {
    schedule = std::make_unique<Schedule1F1B>(*pointers[0], microbatches, loss);
  }
  torch::optim::SGD opt(parameters, 0.01);
  const bool holds_first = rank == 0, holds_last = rank == p - 1;
  const at::Tensor x = torch::randn({batch, width}), y = torch::randn({batch, width});
  std::vector<double> times, bubbles;
  for (int step = -3; step < steps; ++step) {
    opt.zero_grad();
    barrier();
    if (holds_last) {
      schedule->step_last(y, holds_first ? x : at::Tensor());
    } else {
      schedule->step(holds_first ? x : at::Tensor());
    }
    opt.step();
    if (step < 0) continue;
    times.push_back(schedule->last_step_seconds());
    bubbles.push_back(schedule->last_wait_seconds() / schedule->last_step_seconds());
  }
  // Per stage: median step time and median bubble; rank 0 reports the
  // slowest step and the largest bubble over stages.
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  at::Tensor mine = torch::tensor({median(times), median(bubbles)}, at::kDouble);
  std::vector<at::Tensor> all(static_cast<size_t>(p));
  for (auto& t : all) t = at::empty({2}, at::kDouble);
  all_gather(all, mine)->wait();
  if (rank == 0) {
    double step = 0, bubble = 0;
    std::string per_stage;
    for (int s = 0; s < p; ++s) {
      step = std::max(step, all[static_cast<size_t>(s)][0].item<double>());
      bubble = std::max(bubble, all[static_cast<size_t>(s)][1].item<double>());
      per_stage += (s ? "," : "") + std::to_string(all[static_cast<size_t>(s)][1].item<double>()).substr(0, 5);
    }
    const double theory = static_cast<double>(p - 1) / (per_rank * microbatches + p - 1);
    std::printf("pipeline_bench %s stages=%d microbatches=%d step_ms=%.2f samples_per_s=%.0f bubble=%.3f theory=%.3f "
                "per_stage=%s\n",
                schedule_name.c_str(), p, microbatches, step * 1e3, batch / step, bubble, theory, per_stage.c_str());
  }
  destroy_process_group();
  return 0;
}
