// pipelining.h: pipeline parallelism for libtorch modules, after
// torch.distributed.pipelining: a model cut into stages, one stage per
// rank, a batch cut into microbatches, and a schedule that runs the
// microbatches' forwards and backwards on every stage in its order,
// activations going forward and gradients backward by point-to-point.
//
//   auto parts = split_sequential(model, {2, 4});          // 3 stages: [0,2) [2,4) [4,end)
//   PipelineStage stage(parts[get_rank()], get_rank(), 3);  // every rank builds the whole model (one seed)
//   Schedule1F1B schedule(stage, /*n_microbatches=*/8, torch::mse_loss);
//   if (get_rank() == 0) schedule.step(batch);
//   else if (get_rank() == 2) losses = schedule.step_last(target);
//   else schedule.step();
//   optimizer.step();  // over parts[get_rank()]->parameters()
//
// As torch's (scale_grads=True), the gradients a step leaves in .grad are
// the mean over microbatches of each microbatch loss's gradient: with a
// loss that averages over the batch and microbatches of one size, the
// gradient of the loss over the whole batch. Shapes are exchanged once,
// at a stage's first step (torch infers them once too): a later
// microbatch of another shape is an InvalidArgument naming both shapes.
// Schedules (torch's definitions): GPipe runs every forward, then every
// backward; 1F1B runs (stages - stage - 1) forwards, then alternates one
// forward with one backward, then the remaining backwards, so a stage
// holds at most (stages - stage) microbatches' activations;
// Interleaved1F1B does the same over several stages per rank (below). A peer stage
// that fails (its process killed, or an error that ends its group) makes
// every stage waiting for it raise, naming the stage and its rank.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/distributed.h"

namespace cohort {

// split_sequential cuts `model` before each index of `cut_points`
// (ascending, inside the model); the parts share the model's modules.
std::vector<torch::nn::Sequential> split_sequential(const torch::nn::Sequential& model,
                                                    const std::vector<size_t>& cut_points);

// PipelineStage is a part of the model on this rank: stage `stage_index`
// of `num_stages`. Stage s runs on rank s mod P of `group` (nullptr: the
// default group) of P ranks: one stage per rank when num_stages is P; with
// num_stages = v P each rank holds v stages (s, s + P, ...), for
// ScheduleInterleaved1F1B.
class PipelineStage {
 public:
  PipelineStage(torch::nn::Sequential submodule, int stage_index, int num_stages, GroupPtr group = nullptr);

  int stage_index() const { return stage_index_; }
  int num_stages() const { return num_stages_; }
  bool is_first() const { return stage_index_ == 0; }
  bool is_last() const { return stage_index_ == num_stages_ - 1; }
  torch::nn::Sequential& submodule() { return submodule_; }
  const GroupPtr& group() const { return group_; }
  // rank_of: the rank of the group that runs stage `stage`.
  int rank_of(int stage) const { return stage % group_->size(); }

 private:
  torch::nn::Sequential submodule_;
  int stage_index_, num_stages_;
  GroupPtr group_;
};

using LossFn = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;

// PipelineSchedule runs one step of a schedule on this rank's stage.
class PipelineSchedule {
 public:
  PipelineSchedule(PipelineStage& stage, int n_microbatches, LossFn loss_fn);
  // Several stages of this rank, in ascending order (interleaved schedules).
  PipelineSchedule(std::vector<PipelineStage*> stages, int n_microbatches, LossFn loss_fn);
  virtual ~PipelineSchedule();

  // step: the first stage gives the whole batch (cut along dimension 0
  // into the microbatches); middle stages give nothing.
  void step(const at::Tensor& input = at::Tensor());
  // step_last: the last stage gives the targets, cut as the batch, and
  // gets each microbatch's loss back. (A one-stage pipeline gives both.)
  std::vector<at::Tensor> step_last(const at::Tensor& target, const at::Tensor& input = at::Tensor());

  // The time this stage spent in its last step, and the part of it spent
  // waiting for a peer (bench/pipeline_bench's measured bubble).
  double last_step_seconds() const { return step_seconds_; }
  double last_wait_seconds() const { return wait_seconds_; }

  // One action of a schedule: microbatch `mb`'s forward or backward, on
  // this rank's stage number `stage` (0 with one stage per rank).
  struct Action {
    bool forward;
    int mb;
    int stage = 0;
  };

 protected:
  // order is the schedule's actions on this stage, in order.
  virtual std::vector<Action> order() const = 0;
  std::vector<PipelineStage*> stages_;
  PipelineStage& stage_;  // the first of stages_
  int n_microbatches_;

 private:
  class Runner;
  std::vector<at::Tensor> run(const at::Tensor& input, const at::Tensor& target);
  bool holds_first() const { return stages_.front()->is_first(); }
  bool holds_last() const { return stages_.back()->is_last(); }
  LossFn loss_fn_;
  std::vector<std::unique_ptr<Runner>> runners_;  // one per stage
  double step_seconds_ = 0, wait_seconds_ = 0;
};

class ScheduleGPipe : public PipelineSchedule {
 public:
  using PipelineSchedule::PipelineSchedule;

 protected:
  std::vector<Action> order() const override;
};

class Schedule1F1B : public PipelineSchedule {
 public:
  using PipelineSchedule::PipelineSchedule;

 protected:
  std::vector<Action> order() const override;
};

// ScheduleInterleaved1F1B: torch's interleaved 1F1B (Megatron-LM's): each
// rank holds v stages (stage_index r, r + P, ..., for v P stages), and runs
// them in torch's order. The microbatches go in rounds of k = m / R,
// R = max(1, m / P) rounds (k = P when P divides m; m must be a multiple
// of R, as torch 2.13 asks: 10 microbatches at 4 ranks go in 2 rounds
// of 5, 3 in 1 round of 3). A warm-up of (v - 1) k + 2 (P - 1 - r)
// forwards, then one forward and one backward alternately, then the
// remaining backwards; a forward's stage moves to the rank's next stage
// every k forwards, a backward's to the previous one every k backwards.
// The bubble shrinks by v against 1F1B: (P - 1) / (v m + P - 1).
// step() on rank 0 gives the batch, step_last() on rank P - 1 the targets.
class ScheduleInterleaved1F1B : public PipelineSchedule {
 public:
  ScheduleInterleaved1F1B(std::vector<PipelineStage*> stages, int n_microbatches, LossFn loss_fn);

  // rank_order: the actions of rank `rank` of `ranks`, holding
  // `local_stages` stages, for `n_microbatches` (what order() runs; a test
  // compares it with torch's own for many shapes).
  static std::vector<Action> rank_order(int ranks, int rank, int local_stages, int n_microbatches);

 protected:
  std::vector<Action> order() const override;
};

}  // namespace cohort
