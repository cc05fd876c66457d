// pipelining.cc: pipeline stages and schedules (cohort/pipelining.h).
//
// A step runs the schedule's actions in order. A forward takes the
// microbatch (the first stage) or receives the activation from the stage
// before, runs the stage, and sends the output on (isend: the schedule
// never waits for a send, which keeps 1F1B free of deadlock) or, on the
// last stage, takes the loss. A backward runs autograd from the loss (the
// last stage, scaled by 1/microbatches) or from the gradient received from
// the stage after, and sends its input's gradient back. With several
// stages per rank, two ranks carry messages of several pairs of stages: an
// activation into stage s of microbatch mb goes with tag 2 (mb S + s) (S
// stages), the gradient back out of stage s with that tag + 1, the shape
// of what enters stage s once with kShapeTag - s.
#include "cohort/pipelining.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "cohort/errors.h"
#include "cohort/tensor.h"

namespace cohort {
namespace {

constexpr int kShapeTag = -0x5049;  // "PI": the shape of a microbatch's activation, at a first step
constexpr int kMaxDims = 8;

using Clock = std::chrono::steady_clock;

std::string shape_text(at::IntArrayRef sizes) {
  return c10::str(sizes);
}

}  // namespace

std::vector<torch::nn::Sequential> split_sequential(const torch::nn::Sequential& model,
                                                    const std::vector<size_t>& cut_points) {
  size_t last = 0;
  for (size_t cut : cut_points) {
    if (cut <= last || cut >= model->size()) {
      throw InvalidArgument("split_sequential: cut points must ascend inside the " + std::to_string(model->size()) +
                            "-entry model (1 to " + std::to_string(model->size() - 1) + "); got " +
                            std::to_string(cut) + " after " + std::to_string(last));
    }
    last = cut;
  }
  std::vector<torch::nn::Sequential> parts(cut_points.size() + 1);
  size_t i = 0, part = 0;
  for (auto entry = model->begin(); entry != model->end(); ++entry, ++i) {
    if (part < cut_points.size() && i == cut_points[part]) ++part;
    parts[part]->push_back(*entry);
  }
  return parts;
}

PipelineStage::PipelineStage(torch::nn::Sequential submodule, int stage_index, int num_stages, GroupPtr group)
    : submodule_(std::move(submodule)),
      stage_index_(stage_index),
      num_stages_(num_stages),
      group_(group ? std::move(group) : default_group()) {
  if (num_stages < 1 || stage_index < 0 || stage_index >= num_stages) {
    throw InvalidArgument("PipelineStage: stage " + std::to_string(stage_index) + " of " +
                          std::to_string(num_stages) + " does not exist");
  }
  if (num_stages % group_->size() != 0) {
    throw InvalidArgument("PipelineStage: " + std::to_string(num_stages) + " stages on a group of " +
                          std::to_string(group_->size()) +
                          " ranks; one stage per rank, or the same number of stages on every rank");
  }
  if (group_->rank() != rank_of(stage_index)) {
    throw InvalidArgument("PipelineStage: rank " + std::to_string(group_->rank()) + " of the group builds stage " +
                          std::to_string(stage_index) + "; stage s runs on rank s mod " +
                          std::to_string(group_->size()) + " (rank " + std::to_string(rank_of(stage_index)) + ")");
  }
}

// Runner keeps what outlives a step (the shapes exchanged at the first)
// and what a step holds (activations, sends in flight).
class PipelineSchedule::Runner {
 public:
  explicit Runner(PipelineStage& stage) : stage_(stage) {}

  // Peers' messages, each wait timed and its failure named by stage.
  at::Tensor receive(int from_stage, int tag, const std::vector<int64_t>& sizes, at::ScalarType type,
                     const char* what, int mb, double* waited) {
    at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(type));
    const int from = stage_.rank_of(from_stage);
    const auto start = Clock::now();
    try {
      recv(t, from, stage_.group(), tag);
    } catch (const Error& e) {
      throw Error(where() + ": receiving the " + what + " of microbatch " + std::to_string(mb) + " from stage " +
                  std::to_string(from_stage) + " (rank " + std::to_string(from) + ") failed: " + e.what());
    }
    *waited += std::chrono::duration<double>(Clock::now() - start).count();
    return t;
  }
  void send_on(const at::Tensor& t, int to_stage, int tag) {
    at::Tensor held = t.contiguous();
    sends_.push_back({isend(held, stage_.rank_of(to_stage), stage_.group(), tag), held});
  }
  // tag_into: the tag of microbatch mb's activation into stage `stage`
  // (+ 1: the gradient back out of it).
  int tag_into(int stage, int mb) const { return 2 * (mb * stage_.num_stages() + stage); }
  void finish_sends(double* waited) {
    const auto start = Clock::now();
    for (auto& [work, tensor] : sends_) {
      try {
        work->wait();
      } catch (const Error& e) {
        throw Error(where() + ": a send to a neighbouring stage failed: " + e.what());
      }
    }
    sends_.clear();
    *waited += std::chrono::duration<double>(Clock::now() - start).count();
  }

  // The activation of microbatch `mb` from the stage before: its shape
  // comes with it at the first step, and is remembered.
  at::Tensor receive_activation(int mb, double* waited) {
    const int from = stage_.stage_index() - 1;
    auto known = in_shapes_.find(mb);
    if (known == in_shapes_.end()) {
      at::Tensor header =
          receive(from, kShapeTag - stage_.stage_index(), {kMaxDims + 2}, at::kLong, "shape", mb, waited);
      const int64_t* h = header.data_ptr<int64_t>();
      known = in_shapes_.emplace(mb, std::make_pair(std::vector<int64_t>(h + 2, h + 2 + h[0]),
                                                    static_cast<at::ScalarType>(h[1]))).first;
    }
    return receive(from, tag_into(stage_.stage_index(), mb), known->second.first, known->second.second,
                   "activation", mb, waited);
  }
  void send_activation(const at::Tensor& out, int mb) {
    const int to = stage_.stage_index() + 1;
    auto known = out_shapes_.find(mb);
    if (known == out_shapes_.end()) {
      if (out.dim() > kMaxDims) {
        throw InvalidArgument(where() + ": an activation of " + std::to_string(out.dim()) + " dimensions; at most " +
                              std::to_string(kMaxDims));
      }
      at::Tensor header = at::zeros({kMaxDims + 2}, at::kLong);
      int64_t* h = header.data_ptr<int64_t>();
      h[0] = out.dim();
      h[1] = static_cast<int64_t>(out.scalar_type());
      for (int64_t d = 0; d < out.dim(); ++d) h[2 + d] = out.size(d);
      send_on(header, to, kShapeTag - to);
      out_shapes_.emplace(mb, std::vector<int64_t>(out.sizes().begin(), out.sizes().end()));
    } else if (known->second != out.sizes().vec()) {
      throw InvalidArgument(where() + ": microbatch " + std::to_string(mb) + "'s activation is " +
                            shape_text(out.sizes()) + " but was " + shape_text(known->second) +
                            " at the first step; stages exchange shapes once");
    }
    send_on(out.detach(), to, tag_into(to, mb));
  }

  std::string where() const {
    return "pipeline stage " + std::to_string(stage_.stage_index()) + " of " + std::to_string(stage_.num_stages());
  }

  PipelineStage& stage_;
  std::map<int, std::pair<std::vector<int64_t>, at::ScalarType>> in_shapes_;
  std::map<int, std::vector<int64_t>> out_shapes_;
  std::vector<std::pair<std::shared_ptr<Work>, at::Tensor>> sends_;
};

namespace {

std::vector<PipelineStage*> checked_stages(std::vector<PipelineStage*> stages) {
  if (stages.empty() || std::find(stages.begin(), stages.end(), nullptr) != stages.end()) {
    throw InvalidArgument("pipeline schedule: no stage given");
  }
  for (size_t i = 1; i < stages.size(); ++i) {
    if (stages[i]->num_stages() != stages[0]->num_stages() || stages[i]->group() != stages[0]->group() ||
        stages[i]->stage_index() <= stages[i - 1]->stage_index()) {
      throw InvalidArgument("pipeline schedule: a rank's stages must be of one pipeline, in ascending order "
                            "(got stage " + std::to_string(stages[i]->stage_index()) + " after " +
                            std::to_string(stages[i - 1]->stage_index()) + ")");
    }
  }
  return stages;
}

}  // namespace

PipelineSchedule::PipelineSchedule(PipelineStage& stage, int n_microbatches, LossFn loss_fn)
    : PipelineSchedule(std::vector<PipelineStage*>{&stage}, n_microbatches, std::move(loss_fn)) {}

PipelineSchedule::PipelineSchedule(std::vector<PipelineStage*> stages, int n_microbatches, LossFn loss_fn)
    : stages_(checked_stages(std::move(stages))),
      stage_(*stages_.front()),
      n_microbatches_(n_microbatches),
      loss_fn_(std::move(loss_fn)) {
  for (PipelineStage* s : stages_) runners_.push_back(std::make_unique<Runner>(*s));
  if (n_microbatches < 1) {
    throw InvalidArgument("pipeline schedule: " + std::to_string(n_microbatches) + " microbatches; at least 1");
  }
  if (holds_last() && !loss_fn_) throw InvalidArgument("pipeline schedule: the last stage needs a loss function");
}

PipelineSchedule::~PipelineSchedule() = default;

void PipelineSchedule::step(const at::Tensor& input) {
  if (holds_last()) {
    throw InvalidArgument(runners_.back()->where() + " is the last: call step_last(target) there");
  }
  run(input, at::Tensor());
}

std::vector<at::Tensor> PipelineSchedule::step_last(const at::Tensor& target, const at::Tensor& input) {
  if (!holds_last()) throw InvalidArgument(runners_.back()->where() + " is not the last: call step() there");
  return run(input, target);
}

std::vector<at::Tensor> PipelineSchedule::run(const at::Tensor& input, const at::Tensor& target) {
  const int m = n_microbatches_;
  const bool first = holds_first(), last = holds_last();
  auto cut = [&](const at::Tensor& t, const char* what, const Runner& r) {
    if (!t.defined() || t.dim() == 0 || t.size(0) < m) {
      throw InvalidArgument(r.where() + ": the " + std::string(what) + " must have at least " + std::to_string(m) +
                            " rows along dimension 0 to cut into " + std::to_string(m) + " microbatches");
    }
    return t.tensor_split(m, 0);
  };
  const std::vector<at::Tensor> inputs = first ? cut(input, "input", *runners_.front()) : std::vector<at::Tensor>{};
  const std::vector<at::Tensor> targets = last ? cut(target, "target", *runners_.back()) : std::vector<at::Tensor>{};
  if (!first && input.defined()) {
    throw InvalidArgument(runners_.front()->where() + " is not the first: it takes no input");
  }

  // What each of this rank's stages holds between a microbatch's forward
  // and its backward.
  struct Held {
    std::vector<at::Tensor> ins, outs, losses;
  };
  std::vector<Held> held(stages_.size());
  for (Held& h : held) h.ins = h.outs = h.losses = std::vector<at::Tensor>(static_cast<size_t>(m));
  double waited = 0;
  const auto start = Clock::now();
  for (const Action& a : order()) {
    PipelineStage& stage = *stages_[static_cast<size_t>(a.stage)];
    Runner& r = *runners_[static_cast<size_t>(a.stage)];
    Held& h = held[static_cast<size_t>(a.stage)];
    const auto mb = static_cast<size_t>(a.mb);
    if (a.forward) {
      at::Tensor x = stage.is_first() ? inputs[mb] : r.receive_activation(a.mb, &waited).requires_grad_();
      h.ins[mb] = x;
      at::Tensor out = stage.submodule()->forward(x);
      if (stage.is_last()) {
        h.losses[mb] = loss_fn_(out, targets[mb]);
      } else {
        r.send_activation(out, a.mb);
        h.outs[mb] = out;
      }
    } else {
      if (stage.is_last()) {
        (h.losses[mb] / static_cast<double>(m)).backward();
        h.losses[mb] = h.losses[mb].detach();
      } else {
        const at::Tensor& out = h.outs[mb];
        const int next = stage.stage_index() + 1;
        at::Tensor grad = r.receive(next, r.tag_into(next, a.mb) + 1, out.sizes().vec(), out.scalar_type(),
                                    "gradient", a.mb, &waited);
        // A first stage without parameters (a cut right after a Flatten)
        // has an output that needs no gradient: nothing to run backward on.
        if (out.requires_grad()) out.backward(grad);
        h.outs[mb] = at::Tensor();
      }
      if (!stage.is_first()) {
        r.send_on(h.ins[mb].grad(), stage.stage_index() - 1, r.tag_into(stage.stage_index(), a.mb) + 1);
      }
      h.ins[mb] = at::Tensor();
    }
  }
  for (auto& r : runners_) r->finish_sends(&waited);
  step_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
  wait_seconds_ = waited;
  return last ? held.back().losses : std::vector<at::Tensor>{};
}

std::vector<PipelineSchedule::Action> ScheduleGPipe::order() const {
  std::vector<Action> actions;
  for (int mb = 0; mb < n_microbatches_; ++mb) actions.push_back({true, mb});
  for (int mb = 0; mb < n_microbatches_; ++mb) actions.push_back({false, mb});
  return actions;
}

std::vector<PipelineSchedule::Action> Schedule1F1B::order() const {
  const int m = n_microbatches_;
  const int warmup = std::min(m, stage_.num_stages() - stage_.stage_index() - 1);
  std::vector<Action> actions;
  for (int mb = 0; mb < warmup; ++mb) actions.push_back({true, mb});
  for (int i = 0; i < m - warmup; ++i) {
    actions.push_back({true, warmup + i});
    actions.push_back({false, i});
  }
  for (int mb = m - warmup; mb < m; ++mb) actions.push_back({false, mb});
  return actions;
}

ScheduleInterleaved1F1B::ScheduleInterleaved1F1B(std::vector<PipelineStage*> stages, int n_microbatches,
                                                 LossFn loss_fn)
    : PipelineSchedule(std::move(stages), n_microbatches, std::move(loss_fn)) {
  const int ranks = stage_.group()->size(), v = static_cast<int>(stages_.size());
  if (stage_.num_stages() != v * ranks) {
    throw InvalidArgument("ScheduleInterleaved1F1B: this rank gives " + std::to_string(v) + " of its stages; " +
                          std::to_string(stage_.num_stages()) + " stages over " + std::to_string(ranks) +
                          " ranks make " + std::to_string(stage_.num_stages() / ranks) + " a rank");
  }
  const int rounds = std::max(1, n_microbatches / ranks);
  if (n_microbatches % rounds != 0) {
    throw InvalidArgument("ScheduleInterleaved1F1B: " + std::to_string(n_microbatches) + " microbatches over " +
                          std::to_string(ranks) + " ranks go in " + std::to_string(rounds) +
                          " rounds; the microbatches must be a multiple of the rounds (as torch's)");
  }
}

std::vector<PipelineSchedule::Action> ScheduleInterleaved1F1B::order() const {
  return rank_order(stage_.group()->size(), stage_.group()->rank(), static_cast<int>(stages_.size()),
                    n_microbatches_);
}

std::vector<PipelineSchedule::Action> ScheduleInterleaved1F1B::rank_order(int ranks, int rank, int local_stages,
                                                                          int n_microbatches) {
  // torch's _get_1f1b_rank_ops with rounds of k microbatches: op i's
  // forward is on the rank's stage (i / k) mod v, its backward (counted
  // from the end of the warm-up) on stage v - 1 - ((i - warmup) / k) mod v;
  // each stage takes its microbatches in order.
  const int v = local_stages, total = n_microbatches * v;
  const int k = n_microbatches / std::max(1, n_microbatches / ranks);
  const int warmup = std::min((v - 1) * k + 2 * (ranks - 1 - rank), total);
  const int steady = total - warmup;
  std::vector<int> next_forward(static_cast<size_t>(v), 0), next_backward(static_cast<size_t>(v), 0);
  std::vector<Action> actions;
  auto forward = [&](int op) {
    const int s = (op / k) % v;
    actions.push_back({true, next_forward[static_cast<size_t>(s)]++, s});
  };
  auto backward = [&](int op) {
    const int s = v - 1 - ((op - warmup) / k) % v;
    actions.push_back({false, next_backward[static_cast<size_t>(s)]++, s});
  };
  for (int op = 0; op < warmup; ++op) forward(op);
  for (int op = warmup; op < warmup + steady; ++op) {
    forward(op);
    backward(op);
  }
  for (int op = warmup + steady; op < warmup + steady + warmup; ++op) backward(op);
  return actions;
}

}  // namespace cohort
