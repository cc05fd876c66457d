// pipelining.cc: pipeline stages and schedules (cohort/pipelining.h).
//
// A step runs the schedule's actions in order. A forward takes the
// microbatch (the first stage) or receives the activation from the stage
// before, runs the stage, and sends the output on (isend: the schedule
// never waits for a send, which keeps 1F1B free of deadlock) or, on the
// last stage, takes the loss. A backward runs autograd from the loss (the
// last stage, scaled by 1/microbatches) or from the gradient received from
// the stage after, and sends its input's gradient back. Activations go
// with tag 2 mb, gradients with 2 mb + 1, shapes once with kShapeTag.
#include "cohort/pipelining.h"

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
  if (group_->size() != num_stages) {
    throw InvalidArgument("PipelineStage: " + std::to_string(num_stages) + " stages on a group of " +
                          std::to_string(group_->size()) + " ranks; one stage per rank");
  }
  if (group_->rank() != stage_index) {
    throw InvalidArgument("PipelineStage: rank " + std::to_string(group_->rank()) + " of the group builds stage " +
                          std::to_string(stage_index) + "; stage i runs on rank i");
  }
}

// Runner keeps what outlives a step (the shapes exchanged at the first)
// and what a step holds (activations, sends in flight).
class PipelineSchedule::Runner {
 public:
  explicit Runner(PipelineStage& stage) : stage_(stage) {}

  // Peers' messages, each wait timed and its failure named by stage.
  at::Tensor receive(int from, int tag, const std::vector<int64_t>& sizes, at::ScalarType type, const char* what,
                     int mb, double* waited) {
    at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(type));
    const auto start = Clock::now();
    try {
      recv(t, from, stage_.group(), tag);
    } catch (const Error& e) {
      throw Error(where() + ": receiving the " + what + " of microbatch " + std::to_string(mb) + " from stage " +
                  std::to_string(from) + " (rank " + std::to_string(from) + ") failed: " + e.what());
    }
    *waited += std::chrono::duration<double>(Clock::now() - start).count();
    return t;
  }
  void send_on(const at::Tensor& t, int to, int tag) {
    at::Tensor held = t.contiguous();
    sends_.push_back({isend(held, to, stage_.group(), tag), held});
  }
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
      at::Tensor header = receive(from, kShapeTag, {kMaxDims + 2}, at::kLong, "shape", mb, waited);
      const int64_t* h = header.data_ptr<int64_t>();
      known = in_shapes_.emplace(mb, std::make_pair(std::vector<int64_t>(h + 2, h + 2 + h[0]),
                                                    static_cast<at::ScalarType>(h[1]))).first;
    }
    return receive(from, 2 * mb, known->second.first, known->second.second, "activation", mb, waited);
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
      send_on(header, to, kShapeTag);
      out_shapes_.emplace(mb, std::vector<int64_t>(out.sizes().begin(), out.sizes().end()));
    } else if (known->second != out.sizes().vec()) {
      throw InvalidArgument(where() + ": microbatch " + std::to_string(mb) + "'s activation is " +
                            shape_text(out.sizes()) + " but was " + shape_text(known->second) +
                            " at the first step; stages exchange shapes once");
    }
    send_on(out.detach(), to, 2 * mb);
  }

  std::string where() const {
    return "pipeline stage " + std::to_string(stage_.stage_index()) + " of " + std::to_string(stage_.num_stages());
  }

  PipelineStage& stage_;
  std::map<int, std::pair<std::vector<int64_t>, at::ScalarType>> in_shapes_;
  std::map<int, std::vector<int64_t>> out_shapes_;
  std::vector<std::pair<std::shared_ptr<Work>, at::Tensor>> sends_;
};

PipelineSchedule::PipelineSchedule(PipelineStage& stage, int n_microbatches, LossFn loss_fn)
    : stage_(stage),
      n_microbatches_(n_microbatches),
      loss_fn_(std::move(loss_fn)),
      runner_(std::make_unique<Runner>(stage)) {
  if (n_microbatches < 1) {
    throw InvalidArgument("pipeline schedule: " + std::to_string(n_microbatches) + " microbatches; at least 1");
  }
  if (stage.is_last() && !loss_fn_) throw InvalidArgument("pipeline schedule: the last stage needs a loss function");
}

PipelineSchedule::~PipelineSchedule() = default;

void PipelineSchedule::step(const at::Tensor& input) {
  if (stage_.is_last()) {
    throw InvalidArgument(runner_->where() + " is the last: call step_last(target) there");
  }
  run(input, at::Tensor());
}

std::vector<at::Tensor> PipelineSchedule::step_last(const at::Tensor& target, const at::Tensor& input) {
  if (!stage_.is_last()) throw InvalidArgument(runner_->where() + " is not the last: call step() there");
  return run(input, target);
}

std::vector<at::Tensor> PipelineSchedule::run(const at::Tensor& input, const at::Tensor& target) {
  Runner& r = *runner_;
  const int m = n_microbatches_;
  const bool first = stage_.is_first(), last = stage_.is_last();
  auto cut = [&](const at::Tensor& t, const char* what) {
    if (!t.defined() || t.dim() == 0 || t.size(0) < m) {
      throw InvalidArgument(r.where() + ": the " + std::string(what) + " must have at least " + std::to_string(m) +
                            " rows along dimension 0 to cut into " + std::to_string(m) + " microbatches");
    }
    return t.tensor_split(m, 0);
  };
  const std::vector<at::Tensor> inputs = first ? cut(input, "input") : std::vector<at::Tensor>{};
  const std::vector<at::Tensor> targets = last ? cut(target, "target") : std::vector<at::Tensor>{};
  if (!first && input.defined()) throw InvalidArgument(r.where() + " is not the first: it takes no input");

  std::vector<at::Tensor> ins(static_cast<size_t>(m)), outs(static_cast<size_t>(m)), losses(static_cast<size_t>(m));
  double waited = 0;
  const auto start = Clock::now();
  for (const Action& a : order()) {
    const auto mb = static_cast<size_t>(a.mb);
    if (a.forward) {
      at::Tensor x = first ? inputs[mb] : r.receive_activation(a.mb, &waited).requires_grad_();
      ins[mb] = x;
      at::Tensor out = stage_.submodule()->forward(x);
      if (last) {
        losses[mb] = loss_fn_(out, targets[mb]);
      } else {
        r.send_activation(out, a.mb);
        outs[mb] = out;
      }
    } else {
      if (last) {
        (losses[mb] / static_cast<double>(m)).backward();
        losses[mb] = losses[mb].detach();
      } else {
        const at::Tensor& out = outs[mb];
        at::Tensor grad =
            r.receive(stage_.stage_index() + 1, 2 * a.mb + 1, out.sizes().vec(), out.scalar_type(), "gradient", a.mb,
                      &waited);
        // A first stage without parameters (a cut right after a Flatten)
        // has an output that needs no gradient: nothing to run backward on.
        if (out.requires_grad()) out.backward(grad);
        outs[mb] = at::Tensor();
      }
      if (!first) {
        r.send_on(ins[mb].grad(), stage_.stage_index() - 1, 2 * a.mb + 1);
      }
      ins[mb] = at::Tensor();
    }
  }
  r.finish_sends(&waited);
  step_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
  wait_seconds_ = waited;
  return last ? losses : std::vector<at::Tensor>{};
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

}  // namespace cohort
