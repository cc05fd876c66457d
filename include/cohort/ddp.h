// ddp.h: DistributedDataParallel for libtorch modules, as torch's
// torch.nn.parallel.DistributedDataParallel.
//
//   Net net;                                          // a torch::nn module holder
//   cohort::DistributedDataParallel<Net> ddp(net);    // checks and broadcasts from rank 0
//   auto loss = torch::nll_loss(ddp.forward(x), y);
//   loss.backward();                                  // buckets all_reduced during backward
//   optimizer.step();                                 // gradients are averaged over ranks
//
// Gradients are grouped into buckets (bucket_cap_mb, in reverse parameter
// order, a first bucket of first_bucket_cap_mb), rebuilt once after the
// first iteration in the order gradients became ready there (rank 0's
// order, so that every rank agrees). A hook on each parameter's gradient
// accumulator copies its gradient into its bucket; a full bucket starts an
// asynchronous all_reduce at once (always in bucket order), so that
// communication overlaps the rest of backward. The end of backward waits
// for the buckets and writes the averaged gradients back.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/join.h"

namespace cohort {

// DDPOptions are torch's DDP constructor arguments.
struct DDPOptions {
  std::shared_ptr<ProcessGroup> process_group;  // null: the default group
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;  // torch's first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES)
  bool broadcast_buffers = true;     // rank 0's buffers at every forward
  // find_unused_parameters: parameters that did not contribute to the
  // outputs are found by walking the autograd graph from the outputs each
  // forward, so that their buckets still complete.
  bool find_unused_parameters = false;
  // gradient_as_bucket_view: param.grad() is a view into its bucket (no
  // copy, less memory); the optimizer sees the bucket's averaged values.
  bool gradient_as_bucket_view = false;
  // static_graph: the set of used parameters is the same every iteration;
  // it is learnt in the first one and not searched for again.
  bool static_graph = false;
};

// GradBucket is what a communication hook gets: a flat buffer holding the
// gradients of some parameters (torch's dist.GradBucket).
class GradBucket {
 public:
  GradBucket(size_t index, bool is_last, at::Tensor buffer, std::vector<at::Tensor> gradients,
             std::vector<at::Tensor> parameters, std::shared_ptr<ProcessGroup> group)
      : index_(index),
        is_last_(is_last),
        buffer_(std::move(buffer)),
        gradients_(std::move(gradients)),
        parameters_(std::move(parameters)),
        group_(std::move(group)) {}
  // index is the bucket's position; buckets are reduced in index order.
  size_t index() const { return index_; }
  bool is_last() const { return is_last_; }
  // buffer holds this rank's gradients (summed over no_sync steps, not yet
  // divided by the world size).
  at::Tensor& buffer() { return buffer_; }
  // gradients are views of buffer(), one per parameter, shaped as it.
  const std::vector<at::Tensor>& gradients() const { return gradients_; }
  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  const std::shared_ptr<ProcessGroup>& process_group() const { return group_; }

 private:
  size_t index_;
  bool is_last_;
  at::Tensor buffer_;
  std::vector<at::Tensor> gradients_;
  std::vector<at::Tensor> parameters_;
  std::shared_ptr<ProcessGroup> group_;
};

// CommHook reduces a bucket: it returns a future whose value is a tensor
// of the bucket's size and dtype holding the average over ranks. Hooks are
// called in bucket order on every rank; see comm_hooks.h for torch's.
using CommHook = std::function<c10::intrusive_ptr<c10::ivalue::Future>(GradBucket& bucket)>;

// DDPStats: what the last iterations cost, for progress bars and tests.
struct DDPStats {
  int64_t iterations = 0;            // synchronised backward passes
  double comm_seconds = 0;           // summed over iterations: first launch to last completion
  double exposed_seconds = 0;        // summed: time the end of backward waited for communication
  std::vector<size_t> bucket_bytes;  // current buckets, in reduction order
  bool buckets_rebuilt = false;
  // In the last iteration: how many parameters still had no gradient when
  // the first bucket was launched (above zero: it overlapped backward).
  size_t pending_at_first_launch = 0;
  size_t num_parameters = 0;
};

class Reducer;

// DistributedDataParallelBase is the module-independent part of
// DistributedDataParallel (below); use that one.
class DistributedDataParallelBase : public Joinable {
 public:
  // Checks that every rank has the same parameters (names, dtypes, shapes;
  // InvalidArgument naming the first difference and the ranks), broadcasts
  // parameters and buffers from rank 0 and installs the gradient hooks.
  DistributedDataParallelBase(std::shared_ptr<torch::nn::Module> module, DDPOptions options);
  ~DistributedDataParallelBase() override;
  DistributedDataParallelBase(const DistributedDataParallelBase&) = delete;
  DistributedDataParallelBase& operator=(const DistributedDataParallelBase&) = delete;

  // NoSyncGuard: while it lives, backward accumulates gradients locally and
  // communicates nothing (torch's `with ddp.no_sync():`).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallelBase& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallelBase& ddp_;
    bool previous_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // register_comm_hook replaces the default all_reduce; call it before the
  // first backward, once (as torch).
  void register_comm_hook(CommHook hook);

  DDPStats stats() const;
  const std::shared_ptr<ProcessGroup>& process_group() const { return group_; }
  const DDPOptions& options() const { return options_; }

  // Joinable.
  void join_main_hook() override;
  void join_post_hook(bool is_last_joiner) override;
  std::shared_ptr<ProcessGroup> join_process_group() override { return group_; }

 protected:
  // pre_forward syncs buffers and joins the uneven-input protocol;
  // post_forward arms the reducer for the backward of `outputs`.
  void pre_forward();
  void post_forward(const std::vector<at::Tensor>& outputs);

 private:
  void sync_buffers(int src);
  void broadcast_state(int src);

  std::shared_ptr<torch::nn::Module> module_;
  DDPOptions options_;
  std::shared_ptr<ProcessGroup> group_;
  std::unique_ptr<Reducer> reducer_;
  bool require_backward_grad_sync_ = true;
};

// DistributedDataParallel wraps a module holder (a TORCH_MODULE type such
// as `Net`, or std::shared_ptr to a module): forward() runs the module's
// forward between the DDP steps before and after it.
template <class ModuleHolder>
class DistributedDataParallel : public DistributedDataParallelBase {
 public:
  explicit DistributedDataParallel(ModuleHolder module, DDPOptions options = {})
      : DistributedDataParallelBase(pointer_of(module), std::move(options)), module_(std::move(module)) {}

  template <class... Args>
  auto forward(Args&&... args) {
    pre_forward();
    auto out = module_->forward(std::forward<Args>(args)...);
    std::vector<at::Tensor> tensors;
    collect(out, tensors);
    post_forward(tensors);
    return out;
  }
  ModuleHolder& module() { return module_; }

 private:
  template <class M>
  static std::shared_ptr<torch::nn::Module> pointer_of(const M& m) {
    if constexpr (std::is_convertible_v<M, std::shared_ptr<torch::nn::Module>>) {
      return m;
    } else {
      return m.ptr();
    }
  }
  static void collect(const at::Tensor& t, std::vector<at::Tensor>& out) { out.push_back(t); }
  static void collect(const std::vector<at::Tensor>& v, std::vector<at::Tensor>& out) {
    out.insert(out.end(), v.begin(), v.end());
  }
  template <class... T>
  static void collect(const std::tuple<T...>& t, std::vector<at::Tensor>& out) {
    std::apply([&](const auto&... e) { (collect(e, out), ...); }, t);
  }
  template <class T>
  static void collect(const T&, std::vector<at::Tensor>&) {}  // not a tensor: nothing to follow

  ModuleHolder module_;
};

}  // namespace cohort
