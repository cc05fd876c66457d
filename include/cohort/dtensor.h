// dtensor.h: torch's DTensor for libtorch programs: a tensor laid out over
// a DeviceMesh, one placement per mesh dimension. Each rank holds its local
// piece; redistribute moves between layouts with the collectives each
// change needs, and gradients flow back through it.
//
//   auto mesh = cohort::init_device_mesh("cpu", {4});
//   auto w = cohort::distribute_tensor(torch::randn({10, 3}), mesh, {cohort::Shard(0)});
//   w.to_local();                                // rows 0-2 on rank 0, ..., 9 on rank 3
//   auto full = w.redistribute({cohort::Replicate()});  // an all_gather
//   at::Tensor t = w.full_tensor();               // the same, as a plain tensor
//
// As torch 2.13's torch.distributed.tensor:
// - Shard(d): the tensor is cut along dimension d into as many pieces as the
//   mesh dimension has ranks, as torch.chunk cuts it (pieces of ceil(n/k);
//   the last ones smaller or empty); Replicate(): every rank holds it all;
//   Partial(op): every rank holds a tensor of the full shape and the value
//   is their reduction (sum or avg).
// - distribute_tensor takes the whole tensor on every rank and uses the
//   data of the mesh's first rank (torch's src_data_rank=0).
// - redistribute changes one mesh dimension at a time: Shard → Replicate is
//   an all_gather, Partial → Replicate an all_reduce, Partial → Shard a
//   reduce_scatter, Shard(a) → Shard(b) an all_to_all, Replicate → Shard a
//   local cut. Redistributing to Partial is refused, as torch refuses it
//   (a partial value comes from from_local or an operation).
// - Gradients: the local tensors are ordinary autograd tensors. The
//   backward of a redistribution is the redistribution back, with Partial
//   read as Replicate (a partial value's gradient is the whole gradient on
//   every rank): the backward of an all_gather is a local cut, of a cut an
//   all_gather, of a reduce_scatter an all_gather.
//
// Operators on DTensors, with their sharding propagation, are in
// cohort/dtensor_ops.h. Not yet (torch has them): a tensor dimension
// sharded by two mesh dimensions, Partial in distribute_tensor.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "cohort/device_mesh.h"

namespace cohort {

struct Placement {
  enum class Kind { kShard, kReplicate, kPartial };
  Kind kind = Kind::kReplicate;
  int dim = 0;                            // kShard
  ReduceOp::Kind reduce = ReduceOp::SUM;  // kPartial: SUM or AVG

  bool is_shard() const { return kind == Kind::kShard; }
  bool is_replicate() const { return kind == Kind::kReplicate; }
  bool is_partial() const { return kind == Kind::kPartial; }
  bool operator==(const Placement& o) const {
    return kind == o.kind && (kind != Kind::kShard || dim == o.dim) &&
           (kind != Kind::kPartial || reduce == o.reduce);
  }
  bool operator!=(const Placement& o) const { return !(*this == o); }
  // to_string as torch prints them: "Shard(dim=0)", "Replicate()",
  // "Partial(sum)".
  std::string to_string() const;
};

Placement Shard(int dim);
Placement Replicate();
Placement Partial(ReduceOp::Kind reduce = ReduceOp::SUM);

class DTensor {
 public:
  // from_local makes a DTensor of this rank's `local` piece (no
  // communication; the local tensor stays in the autograd graph). The
  // global shape is `shape` when given, else the local shape with every
  // sharded dimension times its mesh dimension's size (even shards).
  static DTensor from_local(const at::Tensor& local, const DeviceMesh& mesh,
                            std::vector<Placement> placements,
                            std::optional<std::vector<int64_t>> shape = std::nullopt);

  const at::Tensor& to_local() const { return local_; }
  const DeviceMesh& device_mesh() const { return mesh_; }
  const std::vector<Placement>& placements() const { return placements_; }
  // shape is the global shape.
  const std::vector<int64_t>& shape() const { return shape_; }

  // redistribute lays the tensor out as `placements` (see above).
  DTensor redistribute(const std::vector<Placement>& placements) const;
  // full_tensor is the whole tensor on every rank (redistributed to
  // Replicate everywhere).
  at::Tensor full_tensor() const;

  // to_string: "DTensor(shape=[10, 3], placements=(Shard(dim=0),), local=[3, 3])".
  std::string to_string() const;

 private:
  DTensor(at::Tensor local, DeviceMesh mesh, std::vector<Placement> placements, std::vector<int64_t> shape);
  at::Tensor local_;
  DeviceMesh mesh_;
  std::vector<Placement> placements_;
  std::vector<int64_t> shape_;
};

// distribute_tensor lays out `tensor` (the whole tensor, on every rank) over
// `mesh` as `placements` (Shard or Replicate), from the data of the
// mesh's first rank. The result is a leaf that requires grad when `tensor`
// does.
DTensor distribute_tensor(const at::Tensor& tensor, const DeviceMesh& mesh,
                          const std::vector<Placement>& placements);

// shard_range is where the piece `index` of `count` of a dimension of
// `size` starts and how long it is, as torch.chunk cuts (ceil(size/count)
// per piece; the last ones smaller or empty).
std::pair<int64_t, int64_t> shard_range(int64_t size, int count, int index);

}  // namespace cohort
