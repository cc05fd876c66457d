// tensor_parallel.cc: column- and row-wise parallel Linears
// (cohort/tensor_parallel.h). The forward wraps the local pieces as
// DTensors (from_local: no communication, the local tensors stay in the
// autograd graph) and lets dtensor_ops' linear do the rest: its rules are
// the communications of tensor parallelism, forward and backward.
#include "cohort/tensor_parallel.h"

#include "cohort/dtensor_ops.h"
#include "cohort/errors.h"

namespace cohort {
namespace {

// normalized is `p` with a negative shard dimension counted from the end
// of a tensor of `dims` dimensions.
Placement normalized(Placement p, int64_t dims) {
  if (p.is_shard() && p.dim < 0) p.dim += static_cast<int>(dims);
  return p;
}

// cut is piece `index` of `count` of `t` along `dim`, as torch.chunk cuts,
// a copy of its own (the whole Linear's memory is not kept).
at::Tensor cut(const at::Tensor& t, int64_t dim, int count, int index) {
  const auto [start, length] = shard_range(t.size(dim), count, index);
  return t.detach().narrow(dim, start, length).clone();
}

std::vector<int64_t> shape_with_last(const at::Tensor& local, int64_t last) {
  std::vector<int64_t> shape(local.sizes().begin(), local.sizes().end());
  shape.back() = last;
  return shape;
}

const char* style_name(const ParallelStyle& style) {
  return std::holds_alternative<ColwiseParallel>(style) ? "ColwiseParallel" : "RowwiseParallel";
}

}  // namespace

TensorParallelLinearImpl::TensorParallelLinearImpl(const torch::nn::Linear& linear, DeviceMesh mesh,
                                                   ParallelStyle style)
    : mesh_(std::move(mesh)), style_(style) {
  if (mesh_.ndim() != 1) {
    throw InvalidArgument(std::string(style_name(style_)) + " needs a 1-D mesh (pass mesh[\"tp\"] of a larger one); got " +
                          mesh_.to_string());
  }
  const at::Tensor& w = linear->weight;
  out_features_ = w.size(0);
  in_features_ = w.size(1);
  const int k = mesh_.size(), r = mesh_.get_local_rank();
  const bool colwise = std::holds_alternative<ColwiseParallel>(style_);
  weight = register_parameter("weight", cut(w, colwise ? 0 : 1, k, r));
  if (linear->bias.defined()) {
    bias = register_parameter("bias", colwise ? cut(linear->bias, 0, k, r) : linear->bias.detach().clone());
  }
}

at::Tensor TensorParallelLinearImpl::forward(const at::Tensor& input) {
  const int64_t dims = input.dim();
  if (dims < 1) throw InvalidArgument(std::string(style_name(style_)) + " Linear: the input is a scalar");
  const bool colwise = std::holds_alternative<ColwiseParallel>(style_);
  const Placement in_layout = normalized(
      colwise ? std::get<ColwiseParallel>(style_).input_layout : std::get<RowwiseParallel>(style_).input_layout,
      dims);
  const Placement out_layout = normalized(
      colwise ? std::get<ColwiseParallel>(style_).output_layout : std::get<RowwiseParallel>(style_).output_layout,
      dims);
  // The input's global shape: its last dimension is the Linear's input
  // features (it may arrive cut along them); a dimension it arrives cut
  // along otherwise (a sequence) is assumed evenly cut.
  std::optional<std::vector<int64_t>> in_shape;
  if (in_layout.is_shard() && in_layout.dim == dims - 1) in_shape = shape_with_last(input, in_features_);
  DTensor x = DTensor::from_local(input, mesh_, {in_layout}, in_shape);
  // What the Linear wants: whole rows for column-wise, the features cut
  // for row-wise (a no-op when the input arrives that way).
  const Placement wanted = colwise ? Replicate() : Shard(static_cast<int>(dims - 1));
  if (x.placements()[0] != wanted) x = x.redistribute({wanted});
  DTensor w = DTensor::from_local(weight, mesh_, {Shard(colwise ? 0 : 1)}, std::vector<int64_t>{out_features_, in_features_});
  std::optional<DTensor> b;
  if (bias.defined()) {
    b = DTensor::from_local(bias, mesh_, {colwise ? Shard(0) : Replicate()}, std::vector<int64_t>{out_features_});
  }
  DTensor y = linear(x, w, b);
  if (y.placements()[0] != out_layout) y = y.redistribute({out_layout});
  return y.to_local();
}

TensorParallelLinear parallelize_linear(const torch::nn::Linear& linear, const DeviceMesh& mesh,
                                        const ParallelStyle& style) {
  return TensorParallelLinear(linear, mesh, style);
}

torch::nn::Sequential parallelize_module(const torch::nn::Sequential& module, const DeviceMesh& mesh,
                                         const std::map<std::string, ParallelStyle>& plan) {
  for (const auto& [name, style] : plan) {
    size_t index = 0;
    bool is_index = !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
    if (is_index) index = std::stoul(name);
    if (!is_index || index >= module->size()) {
      throw InvalidArgument("parallelize_module: the plan names '" + name + "', which is not an entry of the " +
                            std::to_string(module->size()) + "-entry Sequential (its entries are \"0\" to \"" +
                            std::to_string(module->size() - 1) + "\")");
    }
    if (!module->ptr(index)->as<torch::nn::Linear>()) {
      std::string kind = module->ptr(index)->name();  // "torch::nn::ReLUImpl": the holder's name reads better
      if (kind.size() > 4 && kind.compare(kind.size() - 4, 4, "Impl") == 0) kind.resize(kind.size() - 4);
      throw InvalidArgument("parallelize_module: entry '" + name + "' is a " + kind + "; " + style_name(style) +
                            " applies to a Linear");
    }
  }
  torch::nn::Sequential out;
  size_t i = 0;
  for (auto entry = module->begin(); entry != module->end(); ++entry, ++i) {
    const auto found = plan.find(std::to_string(i));
    if (found == plan.end()) {
      out->push_back(*entry);
    } else {
      out->push_back(
          parallelize_linear(torch::nn::Linear(module->ptr<torch::nn::LinearImpl>(i)), mesh, found->second));
    }
  }
  return out;
}

}  // namespace cohort
