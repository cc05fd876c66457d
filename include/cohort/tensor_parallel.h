// tensor_parallel.h: tensor parallelism for libtorch modules, after
// torch.distributed.tensor.parallel: a Linear's weight cut over a 1-D mesh
// (or one dimension of a larger mesh: pass mesh["tp"]) column-wise or
// row-wise, its forward and backward communications being the DTensor
// redistributions of cohort/dtensor_ops.h.
//
//   auto mesh = init_device_mesh("cpu", {get_world_size()});
//   torch::nn::Sequential mlp(torch::nn::Linear(16, 64), torch::nn::ReLU(), torch::nn::Linear(64, 16));
//   auto tp = parallelize_module(mlp, mesh, {{"0", ColwiseParallel()}, {"2", RowwiseParallel()}});
//   auto y = tp->forward(x);  // x and y whole on every rank; one all_reduce forward, one backward
//
// ColwiseParallel keeps rows [out/P] of the weight and of the bias: its
// input is whole (Replicate), its output this rank's slice of the output
// features (Shard(-1)); backward sums the input's gradient over the mesh
// (an all_reduce). RowwiseParallel keeps columns [in/P] of the weight and
// the whole bias: its input is this rank's slice of the input features,
// its output whole (the partial products are all_reduced before the bias is
// added); backward needs no communication. A Colwise followed by a Rowwise
// Linear (an MLP, attention's projections) so communicates once each way,
// as Megatron-LM's pair does. Uneven feature counts are cut as torch.chunk
// cuts (shard_range).
//
// libtorch modules have no forward hooks, so a parallel Linear is a module
// of its own (TensorParallelLinear) that takes the place of the Linear:
// parallelize_module returns a new Sequential with the planned entries
// replaced; a user module holding its Linears as members replaces each one
// itself:
//
//   fc1 = register_module("fc1", parallelize_linear(fc1, mesh, ColwiseParallel()));
//
// (replace_module, where the module is already registered). The parallel
// module's parameters, "weight" and "bias" as the Linear's, are this rank's
// shards: any libtorch optimizer steps on them, and every rank must start
// from the same whole Linear (the same seed), which each cuts locally.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <variant>

#include "cohort/device_mesh.h"
#include "cohort/dtensor.h"

namespace cohort {

// The layouts, as torch's ParallelStyle arguments: input_layout is how the
// input arrives (Replicate, or Shard of a dimension; -1: the last), and
// output_layout how the output leaves; the tensors passed and returned are
// this rank's local pieces (torch's use_local_output=True).
struct ColwiseParallel {
  Placement input_layout = Replicate();
  Placement output_layout = Shard(-1);
};
struct RowwiseParallel {
  Placement input_layout = Shard(-1);
  Placement output_layout = Replicate();
};
// SequenceParallel: torch's style for the LayerNorms and Dropouts between
// a RowwiseParallel Linear whose output is cut along the sequence
// (output_layout Shard(1)) and a ColwiseParallel one that takes it so
// (input_layout Shard(1)): the module runs on this rank's part of the
// sequence, its input and output cut along `sequence_dim`, so activations
// there take 1/P of the memory. A LayerNorm's weight and bias stay whole
// on every rank; each rank's gradient for them is from its part of the
// sequence only, so backward sums them over the mesh (an all_reduce each),
// and every rank steps the same whole parameters.
struct SequenceParallel {
  int sequence_dim = 1;
};
using ParallelStyle = std::variant<ColwiseParallel, RowwiseParallel, SequenceParallel>;

class TensorParallelLinearImpl : public torch::nn::Module {
 public:
  // Cuts this rank's shard of `linear` (whole, the same on every rank).
  TensorParallelLinearImpl(const torch::nn::Linear& linear, DeviceMesh mesh, ParallelStyle style);
  at::Tensor forward(const at::Tensor& input);

  // This rank's shards (registered as "weight" and "bias"; bias undefined
  // when the Linear has none).
  at::Tensor weight, bias;
  const ParallelStyle& style() const { return style_; }
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

 private:
  DeviceMesh mesh_;
  ParallelStyle style_;
  int64_t in_features_, out_features_;
};
TORCH_MODULE(TensorParallelLinear);

// TensorParallelEmbedding is an Embedding cut over a 1-D mesh, as torch's
// ColwiseParallel and RowwiseParallel apply to nn.Embedding.
// ColwiseParallel keeps every row of the table and this rank's slice of
// the embedding features (weight Shard(1)): a lookup needs no
// communication, and its output is this rank's slice of the features
// (output_layout Shard(-1); Replicate gathers them). RowwiseParallel keeps
// this rank's slice of the vocabulary (weight Shard(0), as torch.chunk
// cuts it): each rank looks up the indices it holds and gives zeros for
// the others, and the partial outputs are summed into a whole one
// (output_layout Replicate: an all_reduce; Shard(d): a reduce_scatter).
// The indices are needed whole on every rank: input_layout says how they
// arrive (a Shard gathers them first); torch's RowwiseParallel defaults to
// Shard(-1), so an Embedding whose indices arrive whole, the usual case,
// takes RowwiseParallel{Replicate()}, as in torch's tutorial. padding_idx
// and scale_grad_by_freq are kept; max_norm (which renormalises rows in
// place) and sparse gradients are refused.
class TensorParallelEmbeddingImpl : public torch::nn::Module {
 public:
  TensorParallelEmbeddingImpl(const torch::nn::Embedding& embedding, DeviceMesh mesh, ParallelStyle style);
  at::Tensor forward(const at::Tensor& indices);

  at::Tensor weight;  // this rank's shard, registered as "weight"
  const ParallelStyle& style() const { return style_; }

 private:
  DeviceMesh mesh_;
  ParallelStyle style_;
  int64_t num_embeddings_, embedding_dim_;
  int64_t first_row_ = 0;     // RowwiseParallel: the first index this rank holds
  int64_t padding_idx_ = -1;  // in this rank's rows (-1: none here)
  bool scale_grad_by_freq_ = false;
};
TORCH_MODULE(TensorParallelEmbedding);

// parallelize_embedding: `embedding` cut over `mesh` (1-D) as `style`.
TensorParallelEmbedding parallelize_embedding(const torch::nn::Embedding& embedding, const DeviceMesh& mesh,
                                              const ParallelStyle& style);

// SequenceParallelModule runs a LayerNorm or a Dropout on this rank's part
// of the sequence (SequenceParallel); it holds the module itself, whose
// parameters it shares.
class SequenceParallelModuleImpl : public torch::nn::Module {
 public:
  // `module` is a torch::nn::LayerNorm or torch::nn::Dropout (anything
  // else: InvalidArgument naming it).
  SequenceParallelModuleImpl(std::shared_ptr<torch::nn::Module> module, DeviceMesh mesh, SequenceParallel style);
  // input: this rank's part of the sequence; so is the output.
  at::Tensor forward(const at::Tensor& input);

 private:
  std::shared_ptr<torch::nn::LayerNormImpl> norm_;
  std::shared_ptr<torch::nn::DropoutImpl> dropout_;
  DeviceMesh mesh_;
  SequenceParallel style_;
};
TORCH_MODULE(SequenceParallelModule);

// PrepareModuleInput and PrepareModuleOutput: torch's styles that change
// only the layout of what goes into or comes out of a module (one tensor
// here): `input_layout` is how the tensor arrives (this rank's local piece
// of it), `desired_input_layout` how the module wants it; the tensor is
// redistributed between the two (an all_gather, a local cut, an
// all_to_all, an all_reduce of a Partial; backward the way back). A
// libtorch module has no hooks, so each wraps the module:
//
//   attention = PrepareModuleInputModule(attention, mesh, {Shard(1), Replicate()});
//
// The wrapper's forward takes and returns local pieces, as the module's.
struct PrepareModuleInput {
  Placement input_layout = Shard(1);
  Placement desired_input_layout = Replicate();
};
struct PrepareModuleOutput {
  Placement output_layout = Replicate();
  Placement desired_output_layout = Shard(1);
};

class PrepareModuleInputModuleImpl : public torch::nn::Module {
 public:
  PrepareModuleInputModuleImpl(torch::nn::AnyModule module, DeviceMesh mesh, PrepareModuleInput layouts);
  at::Tensor forward(const at::Tensor& input);

 private:
  torch::nn::AnyModule module_;
  DeviceMesh mesh_;
  PrepareModuleInput layouts_;
};
TORCH_MODULE(PrepareModuleInputModule);

class PrepareModuleOutputModuleImpl : public torch::nn::Module {
 public:
  PrepareModuleOutputModuleImpl(torch::nn::AnyModule module, DeviceMesh mesh, PrepareModuleOutput layouts);
  at::Tensor forward(const at::Tensor& input);

 private:
  torch::nn::AnyModule module_;
  DeviceMesh mesh_;
  PrepareModuleOutput layouts_;
};
TORCH_MODULE(PrepareModuleOutputModule);

// parallelize_linear: `linear` cut over `mesh` (1-D) as `style`.
TensorParallelLinear parallelize_linear(const torch::nn::Linear& linear, const DeviceMesh& mesh,
                                        const ParallelStyle& style);

// parallelize_module: a Sequential like `module` with each entry named in
// `plan` (a Sequential names its entries "0", "1", ...) replaced by its
// parallel version (a Linear's or an Embedding's for ColwiseParallel and
// RowwiseParallel, a LayerNorm's or a Dropout's for SequenceParallel); the
// other entries are shared with `module`. A name that is not an entry, or
// an entry the style does not apply to, raises InvalidArgument naming it.
torch::nn::Sequential parallelize_module(const torch::nn::Sequential& module, const DeviceMesh& mesh,
                                         const std::map<std::string, ParallelStyle>& plan);

}  // namespace cohort
