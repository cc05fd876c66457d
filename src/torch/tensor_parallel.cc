// tensor_parallel.cc: column- and row-wise parallel Linears
// (cohort/tensor_parallel.h). The forward wraps the local pieces as
// DTensors (from_local: no communication, the local tensors stay in the
// autograd graph) and lets dtensor_ops' linear do the rest: its rules are
// the communications of tensor parallelism, forward and backward.
#include "cohort/tensor_parallel.h"

#include <torch/csrc/autograd/functions/utils.h>

#include "cohort/dtensor_ops.h"
#include "cohort/errors.h"
#include "cohort/tensor.h"

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
  if (std::holds_alternative<ColwiseParallel>(style)) return "ColwiseParallel";
  return std::holds_alternative<RowwiseParallel>(style) ? "RowwiseParallel" : "SequenceParallel";
}

// cutting_style refuses SequenceParallel for a module that is cut (a Linear,
// an Embedding): that style applies to the modules between them.
void require_cutting_style(const ParallelStyle& style, const char* module) {
  if (std::holds_alternative<SequenceParallel>(style)) {
    throw InvalidArgument(std::string("SequenceParallel applies to a LayerNorm or a Dropout; a ") + module +
                          " takes ColwiseParallel or RowwiseParallel");
  }
}

// SumGradOverMesh is the backward of sum_grad_over: it sums the gradient
// over `group` (a whole parameter used on this rank's part of the
// sequence has a gradient from that part only).
struct SumGradOverMesh : torch::autograd::Node {
  explicit SumGradOverMesh(GroupPtr g) : group(std::move(g)) {}
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    at::Tensor g = grads[0].contiguous().clone();
    all_reduce(g, ReduceOp::SUM, group);
    return {g};
  }
  std::string name() const override { return "cohort::SumGradOverMesh"; }
  GroupPtr group;
};

// sum_grad_over is `t` forward (sharing its memory); backward sums its
// gradient over `group` before it reaches `t`.
at::Tensor sum_grad_over(const at::Tensor& t, const GroupPtr& group) {
  if (!t.requires_grad() || !torch::autograd::GradMode::is_enabled()) return t;
  auto node = c10::make_intrusive<SumGradOverMesh>(group);
  node->set_next_edges(torch::autograd::collect_next_edges(t));
  at::Tensor out = t.detach();
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace

TensorParallelLinearImpl::TensorParallelLinearImpl(const torch::nn::Linear& linear, DeviceMesh mesh,
                                                   ParallelStyle style)
    : mesh_(std::move(mesh)), style_(style) {
  require_cutting_style(style_, "Linear");
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

TensorParallelEmbeddingImpl::TensorParallelEmbeddingImpl(const torch::nn::Embedding& embedding, DeviceMesh mesh,
                                                         ParallelStyle style)
    : mesh_(std::move(mesh)), style_(style) {
  require_cutting_style(style_, "Embedding");
  const std::string what = std::string(style_name(style_)) + " Embedding";
  if (mesh_.ndim() != 1) {
    throw InvalidArgument(what + " needs a 1-D mesh (pass mesh[\"tp\"] of a larger one); got " + mesh_.to_string());
  }
  const auto& o = embedding->options;
  if (o.max_norm()) {
    throw InvalidArgument(what + ": max_norm renormalises rows of the whole table in place; not supported");
  }
  if (o.sparse()) throw InvalidArgument(what + ": sparse gradients are not supported");
  if (o.scale_grad_by_freq() && std::holds_alternative<RowwiseParallel>(style_)) {
    // A rank sees the counts of its own rows only through indices it
    // masked: the scale would be wrong.
    throw InvalidArgument(what + ": scale_grad_by_freq is not supported (ColwiseParallel keeps it)");
  }
  const at::Tensor& w = embedding->weight;
  num_embeddings_ = w.size(0);
  embedding_dim_ = w.size(1);
  scale_grad_by_freq_ = o.scale_grad_by_freq();
  const int k = mesh_.size(), r = mesh_.get_local_rank();
  const bool colwise = std::holds_alternative<ColwiseParallel>(style_);
  weight = register_parameter("weight", cut(w, colwise ? 1 : 0, k, r));
  int64_t padding = o.padding_idx() ? *o.padding_idx() : -1;
  if (padding < -1) padding += num_embeddings_;  // torch's negative padding_idx
  if (colwise) {
    padding_idx_ = padding;
  } else {
    const auto [start, length] = shard_range(num_embeddings_, k, r);
    first_row_ = start;
    padding_idx_ = padding >= start && padding < start + length ? padding - start : -1;
  }
}

at::Tensor TensorParallelEmbeddingImpl::forward(const at::Tensor& indices) {
  const bool colwise = std::holds_alternative<ColwiseParallel>(style_);
  const int64_t dims = indices.dim();
  const Placement in_layout = normalized(
      colwise ? std::get<ColwiseParallel>(style_).input_layout : std::get<RowwiseParallel>(style_).input_layout,
      std::max<int64_t>(dims, 1));
  const Placement out_layout = normalized(
      colwise ? std::get<ColwiseParallel>(style_).output_layout : std::get<RowwiseParallel>(style_).output_layout,
      dims + 1);
  if (in_layout.is_partial()) {
    throw InvalidArgument(std::string(style_name(style_)) + " Embedding: indices cannot arrive Partial");
  }
  // The indices whole on every rank.
  at::Tensor whole = indices;
  if (!in_layout.is_replicate()) whole = DTensor::from_local(indices, mesh_, {in_layout}).full_tensor();
  std::vector<int64_t> out_shape(whole.sizes().begin(), whole.sizes().end());
  out_shape.push_back(embedding_dim_);
  auto lookup = [&]() {
    if (colwise) {
      // Every row, this rank's features: the output's last dimension cut.
      const at::Tensor local = at::embedding(weight, whole, padding_idx_, scale_grad_by_freq_);
      return DTensor::from_local(local, mesh_, {Shard(static_cast<int>(dims))}, out_shape);
    }
    // This rank's rows: its indices looked up, zeros for the others; the
    // sum over the ranks is the lookup in the whole table.
    const int64_t rows = weight.size(0);
    const at::Tensor mine = (whole >= first_row_) & (whole < first_row_ + rows);
    const at::Tensor local_index = at::where(mine, whole - first_row_, at::zeros_like(whole));
    at::Tensor local = at::embedding(weight, local_index, padding_idx_, scale_grad_by_freq_);
    local = local * mine.unsqueeze(-1).to(local.scalar_type());
    return DTensor::from_local(local, mesh_, {Partial()}, out_shape);
  };
  DTensor y = lookup();
  if (y.placements()[0] != out_layout) y = y.redistribute({out_layout});
  return y.to_local();
}

SequenceParallelModuleImpl::SequenceParallelModuleImpl(std::shared_ptr<torch::nn::Module> module, DeviceMesh mesh,
                                                       SequenceParallel style)
    : norm_(std::dynamic_pointer_cast<torch::nn::LayerNormImpl>(module)),
      dropout_(std::dynamic_pointer_cast<torch::nn::DropoutImpl>(module)),
      mesh_(std::move(mesh)),
      style_(style) {
  if (!norm_ && !dropout_) {
    throw InvalidArgument("SequenceParallel applies to a LayerNorm or a Dropout, not a " + module->name());
  }
  if (mesh_.ndim() != 1) {
    throw InvalidArgument("SequenceParallel needs a 1-D mesh (pass mesh[\"tp\"] of a larger one); got " +
                          mesh_.to_string());
  }
  register_module(norm_ ? "norm" : "dropout", module);
}

at::Tensor SequenceParallelModuleImpl::forward(const at::Tensor& input) {
  const int64_t dims = input.dim();
  const int64_t d = style_.sequence_dim < 0 ? style_.sequence_dim + dims : style_.sequence_dim;
  if (d < 0 || d >= dims) {
    throw InvalidArgument("SequenceParallel: sequence_dim " + std::to_string(style_.sequence_dim) +
                          " of an input of " + std::to_string(dims) + " dimensions");
  }
  if (dropout_) return dropout_->forward(input);
  // The norm acts on the last dimensions, never the sequence's: this
  // rank's part is normalised as the whole would be.
  const auto& o = norm_->options;
  const GroupPtr group = mesh_.get_group(0);
  at::Tensor weight, bias;
  if (norm_->weight.defined()) weight = sum_grad_over(norm_->weight, group);
  if (norm_->bias.defined()) bias = sum_grad_over(norm_->bias, group);
  return torch::layer_norm(input, o.normalized_shape(), weight, bias, o.eps());
}

namespace {

// relayout: `local`, this rank's piece of a tensor laid out as `from`,
// as `to` (the global shape assumed evenly cut along a Shard `from`).
at::Tensor relayout(const at::Tensor& local, const DeviceMesh& mesh, const Placement& from, const Placement& to,
                    const char* what) {
  if (mesh.ndim() != 1) {
    throw InvalidArgument(std::string(what) + " needs a 1-D mesh (pass mesh[\"tp\"] of a larger one); got " +
                          mesh.to_string());
  }
  const int64_t dims = std::max<int64_t>(local.dim(), 1);
  const Placement a = normalized(from, dims), b = normalized(to, dims);
  if (a == b) return local;
  if (b.is_partial()) throw InvalidArgument(std::string(what) + ": a desired layout cannot be Partial");
  return DTensor::from_local(local, mesh, {a}).redistribute({b}).to_local();
}

}  // namespace

PrepareModuleInputModuleImpl::PrepareModuleInputModuleImpl(torch::nn::AnyModule module, DeviceMesh mesh,
                                                           PrepareModuleInput layouts)
    : module_(std::move(module)), mesh_(std::move(mesh)), layouts_(layouts) {
  register_module("module", module_.ptr());
}

at::Tensor PrepareModuleInputModuleImpl::forward(const at::Tensor& input) {
  return module_.forward(
      relayout(input, mesh_, layouts_.input_layout, layouts_.desired_input_layout, "PrepareModuleInput"));
}

PrepareModuleOutputModuleImpl::PrepareModuleOutputModuleImpl(torch::nn::AnyModule module, DeviceMesh mesh,
                                                             PrepareModuleOutput layouts)
    : module_(std::move(module)), mesh_(std::move(mesh)), layouts_(layouts) {
  register_module("module", module_.ptr());
}

at::Tensor PrepareModuleOutputModuleImpl::forward(const at::Tensor& input) {
  return relayout(module_.forward(input), mesh_, layouts_.output_layout, layouts_.desired_output_layout,
                  "PrepareModuleOutput");
}

TensorParallelEmbedding parallelize_embedding(const torch::nn::Embedding& embedding, const DeviceMesh& mesh,
                                              const ParallelStyle& style) {
  return TensorParallelEmbedding(embedding, mesh, style);
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
    const bool sequence = std::holds_alternative<SequenceParallel>(style);
    const bool applies = sequence ? module->ptr(index)->as<torch::nn::LayerNorm>() ||
                                        module->ptr(index)->as<torch::nn::Dropout>()
                                  : module->ptr(index)->as<torch::nn::Linear>() ||
                                        module->ptr(index)->as<torch::nn::Embedding>();
    if (!applies) {
      std::string kind = module->ptr(index)->name();  // "torch::nn::ReLUImpl": the holder's name reads better
      if (kind.size() > 4 && kind.compare(kind.size() - 4, 4, "Impl") == 0) kind.resize(kind.size() - 4);
      throw InvalidArgument("parallelize_module: entry '" + name + "' is a " + kind + "; " + style_name(style) +
                            (sequence ? " applies to a LayerNorm or a Dropout" : " applies to a Linear or an Embedding"));
    }
  }
  torch::nn::Sequential out;
  size_t i = 0;
  for (auto entry = module->begin(); entry != module->end(); ++entry, ++i) {
    const auto found = plan.find(std::to_string(i));
    if (found == plan.end()) {
      out->push_back(*entry);
    } else if (std::holds_alternative<SequenceParallel>(found->second)) {
      out->push_back(SequenceParallelModule(module->ptr(i), mesh, std::get<SequenceParallel>(found->second)));
    } else if (module->ptr(i)->as<torch::nn::Embedding>()) {
      out->push_back(parallelize_embedding(torch::nn::Embedding(module->ptr<torch::nn::EmbeddingImpl>(i)), mesh,
                                           found->second));
    } else {
      out->push_back(
          parallelize_linear(torch::nn::Linear(module->ptr<torch::nn::LinearImpl>(i)), mesh, found->second));
    }
  }
  return out;
}

}  // namespace cohort
