// fsdp.h: fully sharded data parallel for libtorch modules, in the shape
// of torch 2.13's FSDP2 (torch.distributed.fsdp.fully_shard).
//
//   auto mesh = cohort::init_device_mesh("cpu", {cohort::get_world_size()});
//   cohort::FullyShardOptions options{mesh};
//   auto first = cohort::fully_shard(torch::nn::Linear(64, 256), options);   // a unit each
//   auto second = cohort::fully_shard(torch::nn::Linear(256, 10), options);
//   auto model = cohort::fully_shard(torch::nn::Sequential(first, torch::nn::ReLU(), second), options);
//   torch::optim::Adam optimizer(model->parameters());   // steps on this rank's shards
//   auto loss = torch::mse_loss(model->forward(x), y);   // x, y: this rank's part of the batch
//   loss.backward();                                     // gradients reduce-scattered and averaged
//   optimizer.step();
//
// As torch's fully_shard:
// - Each parameter of a unit is sharded on dimension 0 over the mesh's
//   shard dimension, as torch.chunk cuts (ceil(n/k) rows a rank, the last
//   ones fewer or none): between steps the module's own parameter tensors
//   hold this rank's rows only, so module->parameters() gives the optimizer
//   the shards, under their own names. Parameters start from their values
//   on each rank: initialize them alike (the same seed), as torch expects.
// - Before a unit's forward its parameters are all-gathered (one
//   collective per unit); after it they are freed again when
//   reshard_after_forward (the default) and gathered again when backward
//   reaches the unit; once backward has every gradient of the unit, they
//   are reduce-scattered and averaged into the shards (one collective per
//   unit) and the whole parameters and gradients freed, so that any
//   libtorch optimizer steps on the shards.
// - Prefetch: the root learns the order of its units in the first
//   forward; from then on a unit's forward starts the next unit's gather
//   (asynchronously, on the group's worker) before it computes, and in
//   backward a unit starts the gather of the unit before it.
// - Units nest: wrap the layers first, the root last; a unit takes the
//   parameters of its module that no inner unit took.
// - MixedPrecisionPolicy: param_dtype for the gathered parameters (and the
//   unit's floating-point input), reduce_dtype for the gradient reduction,
//   output_dtype for the unit's output; the shards and the optimizer stay
//   in the parameters' own dtype.
// - HSDP: a 2-D mesh (replicate, shard): shards over the last dimension,
//   and gradients are also averaged over the first.
// - set_requires_gradient_sync(false) (torch's no_sync): gradients of the
//   coming backwards accumulate unsharded on each rank, and the next
//   backward with sync on reduces them all at once.
//
// libtorch modules have no forward hooks, so a unit is a module that
// holds yours: FullyShardImpl<M>::forward(x) gathers, calls your module's
// forward(x) and frees. It takes one tensor and returns one, so it fits a
// torch::nn::Sequential. A module whose forward takes something else keeps
// an FSDPUnit of its own and calls it around its computation:
//
//   unit.before_forward();                   // in your forward: gathers
//   at::Tensor out = ...;                    // your computation
//   return unit.after_forward(out);          // frees; arranges backward
#pragma once

#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cohort/device_mesh.h"
#include "cohort/dtensor.h"

namespace cohort {

// MixedPrecisionPolicy: the dtypes of a unit's communication and compute
// (torch's of the same name); unset means the parameters' own, and an
// unset reduce_dtype means param_dtype.
struct MixedPrecisionPolicy {
  std::optional<at::ScalarType> param_dtype;   // of gathered parameters and the input
  std::optional<at::ScalarType> reduce_dtype;  // of the gradient reduction
  std::optional<at::ScalarType> output_dtype;  // of the unit's output
};

// FullyShardOptions: fully_shard's keyword arguments.
struct FullyShardOptions {
  // The mesh: 1-D (shard) or 2-D (replicate, shard: HSDP). Default: every
  // rank of the default group.
  std::optional<DeviceMesh> mesh;
  bool reshard_after_forward = true;
  MixedPrecisionPolicy mp_policy;
};

// FSDPUnit is the state of one unit: its parameters, their shards and the
// groups that gather and reduce them. FullyShardImpl holds one; a module
// with another forward signature may hold one itself (see above).
class FSDPUnit {
 public:
  // FSDPUnit shards the parameters of `module` that no other unit took
  // (the module must outlive the unit).
  FSDPUnit(torch::nn::Module& module, FullyShardOptions options);
  ~FSDPUnit();
  FSDPUnit(const FSDPUnit&) = delete;
  FSDPUnit& operator=(const FSDPUnit&) = delete;

  // before_forward gathers the parameters (if they are not gathered
  // already) and casts `input` to param_dtype when it is floating point.
  at::Tensor before_forward(const at::Tensor& input);
  void before_forward();
  // after_forward frees the gathered parameters when reshard_after_forward
  // (or when no gradient is to come), arranges for backward to gather them
  // again and reduce their gradients, and casts `output` to output_dtype.
  at::Tensor after_forward(const at::Tensor& output);

  // unshard gathers the parameters; reshard frees them (each a no-op when
  // already so). Between steps the unit is resharded.
  void unshard();
  void reshard();
  bool is_unsharded() const { return unsharded_; }

  // set_requires_gradient_sync: see above (torch's name).
  void set_requires_gradient_sync(bool sync) { sync_gradients_ = sync; }
  void set_reshard_after_forward(bool reshard) { options_.reshard_after_forward = reshard; }

  // The parameters this unit shards, in the module's order, with their
  // full shapes.
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  std::vector<int64_t> full_shape(const at::Tensor& parameter) const;
  // shard_offset is the first row of the parameter this rank holds.
  int64_t shard_offset(const at::Tensor& parameter) const;
  const DeviceMesh& mesh() const { return mesh_; }

  // prefetches counts the gathers this unit got started early by another
  // unit (forward and backward).
  int64_t prefetches() const { return prefetches_; }
  // forward_failed undoes before_forward's bookkeeping when the module's
  // forward threw (FullyShardImpl calls it).
  void forward_failed();

  // full_tensor gathers one of this unit's parameters whole (collective
  // over the unit's shard group: every rank calls it for the same
  // parameter).
  at::Tensor full_tensor(const at::Tensor& parameter) const;
  // load_full copies `value`, the whole parameter, into this rank's shard.
  void load_full(const at::Tensor& parameter, const at::Tensor& value);
  // sharded_parameter is the parameter as torch's fully_shard holds it: a
  // DTensor over the unit's mesh, Shard(0) on the shard dimension
  // (Replicate() before it for HSDP), whose local tensor is the parameter
  // itself (the shard, so gradients and optimizer steps through it reach
  // the unit). Between steps only: while gathered the parameter holds the
  // whole (InvalidArgument). A scalar parameter has no rows to shard:
  // InvalidArgument.
  DTensor sharded_parameter(const at::Tensor& parameter) const;

 private:
  struct Param;
  struct Gather;
  struct Reduction;
  void pre_backward();
  // grad_ready: autograd accumulated one parameter's gradient.
  void grad_ready();
  // post_backward starts the reduction of the unit's gradients;
  // finish_reduction (at the end of backward) puts them into the shards.
  void post_backward();
  void finish_reduction();
  // start_gather issues the unit's all_gather asynchronously (a prefetch);
  // unshard then finishes it.
  void start_gather();
  void finish_gather(Gather& gather);
  // The units' order, learnt by the root in its first forward.
  void record_forward(FSDPUnit* unit);
  void learn_order();
  const Param& param_of(const at::Tensor& parameter, const char* what) const;

  FullyShardOptions options_;
  DeviceMesh mesh_;
  GroupPtr shard_group_;
  GroupPtr replicate_group_;  // HSDP; null on a 1-D mesh
  int shard_size_ = 1;
  int shard_index_ = 0;
  std::vector<Param> params_;
  bool unsharded_ = false;
  bool sync_gradients_ = true;
  // This backward: begun (its end-of-backward callback is queued), how
  // many parameters' gradients are in, whether they were reduced.
  bool in_backward_ = false;
  size_t grads_ready_ = 0;
  bool reduced_ = false;
  std::unique_ptr<Gather> pending_gather_;        // a prefetch in flight
  std::unique_ptr<Reduction> pending_reduction_;  // gradients being reduced
  int64_t prefetches_ = 0;
  // The root: the units its forward ran, in order, while learning.
  bool learning_order_ = true;
  std::vector<FSDPUnit*> forward_order_;
  // Every unit: whom to prefetch (set by the root once it learnt).
  FSDPUnit* forward_next_ = nullptr;
  FSDPUnit* backward_next_ = nullptr;
  // alive_ lets a callback queued with autograd know that the unit is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// FullyShardImpl<M> is a unit around a module holder M (torch::nn::Linear,
// torch::nn::Sequential, a TORCH_MODULE of yours) whose forward takes one
// tensor and returns one. The module is its child "module".
template <class M>
class FullyShardImpl : public torch::nn::Module {
 public:
  FullyShardImpl(M module, FullyShardOptions options = {})
      : module_(register_module("module", std::move(module))), unit_(*module_.ptr(), std::move(options)) {}

  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = unit_.before_forward(input);
    at::Tensor out;
    try {
      out = module_->forward(x);
    } catch (...) {
      unit_.forward_failed();
      throw;
    }
    return unit_.after_forward(out);
  }

  M& module() { return module_; }
  FSDPUnit& unit() { return unit_; }

 private:
  M module_;
  FSDPUnit unit_;
};

// fully_shard makes `module` a unit (torch's fully_shard).
template <class M>
std::shared_ptr<FullyShardImpl<M>> fully_shard(M module, FullyShardOptions options = {}) {
  return std::make_shared<FullyShardImpl<M>>(std::move(module), std::move(options));
}

// fsdp_unit_of is the unit that shards `parameter`, or null.
FSDPUnit* fsdp_unit_of(const at::Tensor& parameter);

// set_requires_gradient_sync sets it for every unit under `module` (as
// torch's, which recurses).
void set_requires_gradient_sync(torch::nn::Module& module, bool sync);

// full_state_dict is every parameter and buffer of `module` by name, whole
// on every rank (sharded ones gathered: collective, every rank calls it);
// load_full_state_dict copies such a dict back, each rank taking its
// shards. Names are the module's own.
std::map<std::string, at::Tensor> full_state_dict(torch::nn::Module& module);
void load_full_state_dict(torch::nn::Module& module, const std::map<std::string, at::Tensor>& state);

}  // namespace cohort
