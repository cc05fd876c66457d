// reducer.h: the gradient side of DistributedDataParallel: buckets, the
// hooks on gradient accumulators, launching each bucket's reduction as soon
// as it is full, and writing the averages back at the end of backward.
//
// Threads: hooks and the end-of-backward callback run on the thread that
// runs backward (libtorch's CPU autograd runs on the caller's thread); the
// only thing another thread touches is a bucket's future, completed by the
// process group's worker.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/function.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cohort/ddp.h"

namespace cohort {

class Reducer {
 public:
  // `params` are the parameters that require gradients, in module order.
  Reducer(std::vector<at::Tensor> params, std::vector<std::string> names, std::shared_ptr<ProcessGroup> group,
          const DDPOptions& options);
  ~Reducer();  // removes the hooks
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // prepare_for_backward arms the hooks for the backward of `outputs`
  // (and finds the unused parameters when asked to); disarm makes the next
  // backward communicate nothing (no_sync, or no grad).
  void prepare_for_backward(const std::vector<at::Tensor>& outputs);
  void disarm() { expect_hooks_ = false; }

  void register_comm_hook(CommHook hook);

  // shadow_backward runs, on a joined rank, the collectives of one
  // synchronised backward with zero gradients.
  void shadow_backward();

  DDPStats stats() const;

 private:
  struct Bucket {
    at::Tensor contents;  // flat, one dtype
    std::vector<size_t> params;
    std::vector<at::Tensor> views;  // of contents, shaped as the parameters
    at::Tensor inverse_world;       // 1/world size as a 0-dim tensor of the bucket's dtype, made once
    size_t pending = 0;
    // Reduced straight in the parameters' gradients this iteration (no copy
    // into contents, none back): see reduces_in_place.
    bool in_place = false;
    // contents are symmetric memory that the other ranks on this host map
    // (ProcessGroup::alloc_symmetric): the bucket reduces in place there.
    bool shared = false;
    c10::intrusive_ptr<c10::ivalue::Future> future;
    std::chrono::steady_clock::time_point launched;
    std::shared_ptr<std::atomic<int64_t>> done_ns;  // written by whoever completes the future
  };
  struct Place {
    size_t bucket = 0;
    size_t slot = 0;
  };

  void install_hooks();
  void install_hook(size_t index);  // (again) on the parameter's current accumulator
  void remove_hooks(size_t index);
  // autograd_hook: parameter `index`'s gradient is ready, in param.grad()
  // (`captured` null) or, under distributed autograd, in *captured, which
  // the engine hands to the context instead of .grad: mark_ready copies it
  // into its bucket, and the hook returns the bucket's view in its place
  // (what the context gets: the average, once finalize has waited).
  void autograd_hook(size_t index, const at::Tensor* captured = nullptr);
  at::Tensor captured_gradient(size_t index, const at::Tensor& grad);
  void mark_ready(size_t index, const at::Tensor* captured = nullptr);
  void launch_ready_buckets();
  // divides_before_sum: the default reduction divides this bucket's
  // gradients by the world size as it copies them in (float16), rather than
  // asking the all_reduce to average.
  bool divides_before_sum(const Bucket& bucket) const;
  // may_reduce_in_place: a CPU bucket on the default mode's fast path
  // that is not shared is reduced with all_reduce_coalesced over its
  // gradients where they are, when every one of them is in_place_ready
  // (mark_ready then leaves it uncopied).
  bool may_reduce_in_place(const Bucket& bucket) const;
  // default_mode_fast_path: no hook, view mode, float16 or unused-parameter
  // bookkeeping, and a CPU bucket. Such a bucket is reduced without copies:
  // a shared one (adopts_gradients) takes the gradients in, as aliases of
  // its views, the first time they arrive (autograd then accumulates into
  // it, and the ranks reduce it in each other's memory); any other reduces
  // the gradients where they are (may_reduce_in_place).
  bool default_mode_fast_path(const Bucket& bucket) const;
  bool adopts_gradients(const Bucket& bucket) const;
  bool in_place_ready(size_t index, const Bucket& bucket) const;
  void launch(size_t b);
  // reduce_bucket starts bucket b's reduction; `from_gradients` false: of
  // its contents as they are (a joined rank's zeros).
  c10::intrusive_ptr<c10::ivalue::Future> reduce_bucket(size_t b, bool from_gradients = true);
  void finalize();
  void wait_buckets();
  void write_back(const std::vector<int32_t>& globally_used);
  std::vector<int32_t> all_reduce_used_map(const std::vector<int32_t>& local);
  void learn_static_graph(const std::vector<int32_t>& globally_used);
  void rebuild_buckets();
  void build_buckets(const std::vector<size_t>& order);
  void find_unused(const std::vector<at::Tensor>& outputs);
  bool needs_used_map() const;
  bool should_rebuild() const;

  const std::vector<at::Tensor> params_;
  const std::vector<std::string> names_;
  const std::shared_ptr<ProcessGroup> group_;
  const DDPOptions options_;
  CommHook hook_;

  std::vector<c10::intrusive_ptr<torch::autograd::Node>> accumulators_;  // kept alive: they hold the hooks
  std::vector<uintptr_t> hook_keys_;
  // The parameters' tensor hooks (CapturedGradientHook; libtorch gives
  // them no key: removed by address).
  std::vector<torch::autograd::FunctionPreHook*> pre_hooks_;
  std::unordered_map<const torch::autograd::Node*, size_t> index_of_accumulator_;

  std::vector<Bucket> buckets_;
  std::vector<Place> place_;  // per parameter

  // The current iteration.
  bool expect_hooks_ = false;
  bool finalize_queued_ = false;
  // This backward runs under distributed autograd: gradients come from the
  // pre-hooks, .grad is neither read nor written, and the buckets reduce
  // copies (no in-place or adopting fast path, which work on .grad).
  bool captured_mode_ = false;
  size_t next_launch_ = 0;
  std::vector<char> ready_;
  std::vector<int32_t> locally_used_;
  std::vector<size_t> unused_;
  size_t pending_at_first_launch_ = 0;
  size_t ready_count_ = 0;
  std::chrono::steady_clock::time_point all_ready_;  // when the last gradient arrived

  // Learnt once.
  std::vector<size_t> ready_order_;  // the first iteration's, for the rebuild
  bool rebuilt_ = false;
  bool static_learnt_ = false;
  std::vector<size_t> static_unused_;
  std::vector<int32_t> static_globally_used_;

  int64_t iterations_ = 0;
  double comm_seconds_ = 0;
  double exposed_seconds_ = 0;
};

}  // namespace cohort
