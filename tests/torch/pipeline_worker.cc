// pipeline_worker: one rank of tests/torch/pipeline_process_test.cc,
// joined by env:// (2 or 4 ranks). Argument: the schedule ("gpipe" or
// "1f1b", one stage a rank; "1f1b-user", the same with each stage a user
// module; "interleaved", two stages a rank) and the
// number of microbatches; or "kill": stage 1 of 4 kills itself (SIGKILL)
// in the middle of the second step.
// An MLP (7 entries, 15 for 8 stages) cut into its stages trains two SGD
// steps on a batch of 8; every rank checks its loss (the last), its
// stages' parameters' gradients and their parameters after each step
// against the whole model run in this one process on the same
// microbatches. Prints "rank R ok: ..." and exits 0, or says what was
// wrong and exits 1.
#include <signal.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cohort/distributed.h"
#include "cohort/errors.h"
#include "cohort/pipelining.h"
#include "torch/worker_checks.h"

using namespace cohort;
using cohort::testing::check;

namespace {

// whole_model: Linear(6, 8), then (Tanh, Linear(8, 8)) `hidden` times,
// then Tanh, Linear(8, 4): 7 entries with 2 hidden, 15 with 6.
torch::nn::Sequential whole_model(int hidden = 2) {
  torch::manual_seed(21);
  torch::nn::Sequential model(torch::nn::Linear(6, 8));
  for (int i = 0; i < hidden; ++i) {
    model->push_back(torch::nn::Tanh());
    model->push_back(torch::nn::Linear(8, 8));
  }
  model->push_back(torch::nn::Tanh());
  model->push_back(torch::nn::Linear(8, 4));
  model->to(at::kDouble);
  return model;
}

int hidden_for(int stages) { return stages > 4 ? 6 : 2; }

// cuts_for: every stage starts with a Linear (7 entries: 2 or 4 stages;
// 15 entries: 8 stages).
std::vector<size_t> cuts_for(int stages) {
  if (stages == 2) return {4};
  if (stages == 4) return {2, 4, 6};
  if (stages == 8) return {2, 4, 6, 8, 10, 12, 14};
  return {};
}

bool close(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.sizes() == b.sizes() && at::allclose(a, b, 1e-12, 1e-12);
}

at::Tensor mse(const at::Tensor& out, const at::Tensor& target) {
  return torch::mse_loss(out, target);
}

// UserStage: a stage written as a user module (its own forward over its
// own members) rather than a cut of a Sequential; a PipelineStage takes it
// as the one entry of a Sequential.
struct UserStageImpl : torch::nn::Module {
  explicit UserStageImpl(torch::nn::Sequential layers) : layers_(register_module("layers", std::move(layers))) {}
  at::Tensor forward(const at::Tensor& x) { return layers_->forward(x); }
  torch::nn::Sequential layers_;
};
TORCH_MODULE(UserStage);

// A stage that kills its own process in the middle of its forward.
struct DieImpl : torch::nn::Module {
  bool armed = false;
  at::Tensor forward(const at::Tensor& x) {
    if (armed) ::raise(SIGKILL);
    return x;
  }
};
TORCH_MODULE(Die);

void train(const std::string& kind, int m) {
  const int world = get_world_size(), rank = get_rank();
  const int per_rank = kind == "interleaved" ? 2 : 1, stages = per_rank * world;
  const bool user_modules = kind == "1f1b-user";
  torch::nn::Sequential model = whole_model(hidden_for(stages)), reference = whole_model(hidden_for(stages));
  const auto parts = split_sequential(model, cuts_for(stages));
  const auto reference_parts = split_sequential(reference, cuts_for(stages));
  // This rank's stages: rank, rank + world, ...
  std::vector<std::unique_ptr<PipelineStage>> mine_stages;
  std::vector<PipelineStage*> stage_pointers;
  std::vector<at::Tensor> mine, theirs;
  for (int s = rank; s < stages; s += world) {
    torch::nn::Sequential module =
        user_modules ? torch::nn::Sequential(UserStage(parts[static_cast<size_t>(s)])) : parts[static_cast<size_t>(s)];
    mine_stages.push_back(std::make_unique<PipelineStage>(module, s, stages));
    stage_pointers.push_back(mine_stages.back().get());
    for (const auto& p : parts[static_cast<size_t>(s)]->parameters()) mine.push_back(p);
    for (const auto& p : reference_parts[static_cast<size_t>(s)]->parameters()) theirs.push_back(p);
  }
  const bool holds_first = rank == 0, holds_last = rank == world - 1;
  std::unique_ptr<PipelineSchedule> schedule;
  if (kind == "gpipe") {
    schedule = std::make_unique<ScheduleGPipe>(*stage_pointers[0], m, mse);
  } else if (kind == "1f1b" || user_modules) {
    schedule = std::make_unique<Schedule1F1B>(*stage_pointers[0], m, mse);
  } else {
    schedule = std::make_unique<ScheduleInterleaved1F1B>(stage_pointers, m, mse);
  }
  torch::optim::SGD opt(mine, torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD opt_reference(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::manual_seed(5);
  for (int step = 0; step < 2; ++step) {
    const at::Tensor x = torch::randn({8, 6}, at::kDouble), y = torch::randn({8, 4}, at::kDouble);
    opt.zero_grad();
    opt_reference.zero_grad();
    // The reference: the mean over microbatches of each one's loss.
    const auto xs = x.tensor_split(m, 0), ys = y.tensor_split(m, 0);
    std::vector<at::Tensor> want_losses;
    at::Tensor total = at::zeros({}, at::kDouble);
    for (int i = 0; i < m; ++i) {
      want_losses.push_back(mse(reference->forward(xs[static_cast<size_t>(i)]), ys[static_cast<size_t>(i)]));
      total = total + want_losses.back();
    }
    (total / m).backward();
    std::vector<at::Tensor> losses;
    if (holds_last) {
      losses = schedule->step_last(y, holds_first ? x : at::Tensor());
    } else {
      schedule->step(holds_first ? x : at::Tensor());
    }
    const std::string when = kind + ", " + std::to_string(m) + " microbatches, step " + std::to_string(step);
    if (holds_last) {
      check(losses.size() == static_cast<size_t>(m), when + ": a loss per microbatch");
      for (int i = 0; i < m && i < static_cast<int>(losses.size()); ++i) {
        check(close(losses[static_cast<size_t>(i)], want_losses[static_cast<size_t>(i)]),
              when + ": loss of microbatch " + std::to_string(i));
      }
    }
    check(!mine.empty(), when + ": this rank holds parameters");
    for (size_t i = 0; i < mine.size(); ++i) {
      check(close(mine[i].grad(), theirs[i].grad()), when + ": gradient of parameter " + std::to_string(i));
    }
    opt.step();
    opt_reference.step();
    for (size_t i = 0; i < mine.size(); ++i) check(close(mine[i], theirs[i]), when + ": parameter " + std::to_string(i));
    check(schedule->last_wait_seconds() <= schedule->last_step_seconds(), when + ": waits within the step");
  }
}

// kill: stage 1 of 4 dies in its second step; every other stage must
// raise, naming a stage, rather than hang.
void kill_a_stage() {
  const int world = get_world_size(), rank = get_rank();
  torch::nn::Sequential model = whole_model();
  auto parts = split_sequential(model, cuts_for(world));
  Die die;
  parts[static_cast<size_t>(rank)]->push_back(die);
  PipelineStage stage(parts[static_cast<size_t>(rank)], rank, world);
  Schedule1F1B schedule(stage, 4, mse);
  for (int step = 0; step < 2; ++step) {
    die->armed = rank == 1 && step == 1;
    const at::Tensor x = torch::randn({8, 6}, at::kDouble), y = torch::randn({8, 4}, at::kDouble);
    try {
      if (stage.is_last()) {
        schedule.step_last(y);
      } else {
        schedule.step(stage.is_first() ? x : at::Tensor());
      }
    } catch (const Error& e) {
      std::printf("rank %d raised: %s\n", rank, e.what());
      std::fflush(stdout);
      std::_Exit(3);
    }
  }
  std::printf("rank %d wrong: the step went through with stage 1 dead\n", rank);
  std::_Exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const std::string kind = argc > 1 ? argv[1] : "gpipe";
  try {
    init_process_group();
    cohort::testing::worker_checks().rank = get_rank();
    if (kind == "kill") kill_a_stage();
    train(kind, argc > 2 ? std::atoi(argv[2]) : 4);
    destroy_process_group();
  } catch (const std::exception& e) {
    std::printf("rank %d wrong: %s\n", cohort::testing::worker_checks().rank, e.what());
    return 1;
  }
  if (cohort::testing::worker_checks().failures) return 1;
  std::printf("rank %d ok: every loss, gradient and parameter as the whole model's\n",
              cohort::testing::worker_checks().rank);
  return 0;
}
