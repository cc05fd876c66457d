#include "cohort/dtensor.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

#include <set>

#include "cohort/errors.h"
#include "cohort/process_group.h"
#include "cohort/tensor.h"

namespace cohort {
namespace {

std::string placements_text(const std::vector<Placement>& placements) {
  std::string s = "(";
  for (size_t i = 0; i < placements.size(); ++i) s += (i ? ", " : "") + placements[i].to_string();
  return s + (placements.size() == 1 ? ",)" : ")");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// check_placements refuses what cohort's DTensor cannot lay out, naming it.
void check_placements(const char* what, const DeviceMesh& mesh, const std::vector<Placement>& placements,
                      int64_t ndim) {
  if (static_cast<int>(placements.size()) != mesh.ndim()) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(placements.size()) + " placements " +
                          placements_text(placements) + " for a mesh of " + std::to_string(mesh.ndim()) +
                          " dimensions (one per mesh dimension)");
  }
  std::set<int> sharded;
  for (const Placement& p : placements) {
    if (p.is_shard()) {
      if (p.dim < 0 || p.dim >= ndim) {
        throw InvalidArgument(std::string(what) + ": " + p.to_string() + " of a tensor of " +
                              std::to_string(ndim) + " dimensions");
      }
      if (!sharded.insert(p.dim).second) {
        throw InvalidArgument(std::string(what) + ": " + placements_text(placements) +
                              " shards tensor dimension " + std::to_string(p.dim) +
                              " along two mesh dimensions, which cohort's DTensor does not do yet");
      }
    }
    if (p.is_partial() && p.reduce != ReduceOp::SUM && p.reduce != ReduceOp::AVG) {
      throw InvalidArgument(std::string(what) + ": Partial takes sum or avg");
    }
  }
}

// local_shape is this rank's piece of `shape` under `placements`.
std::vector<int64_t> local_shape(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
                                 const std::vector<Placement>& placements) {
  std::vector<int64_t> out = shape;
  for (int i = 0; i < mesh.ndim(); ++i) {
    const Placement& p = placements[static_cast<size_t>(i)];
    if (p.is_shard()) out[p.dim] = shard_range(shape[p.dim], mesh.size(i), mesh.get_local_rank(i)).second;
  }
  return out;
}

// piece is `t` with dimension `dim` of `length` (a shape for one rank's
// piece in a collective).
at::Tensor empty_piece(const at::Tensor& like, int dim, int64_t length) {
  std::vector<int64_t> sizes = like.sizes().vec();
  sizes[dim] = length;
  return at::empty(sizes, like.options());
}

// change_one moves `local` along mesh dimension `i` from `from` to `to`;
// `shape` is the global shape. No autograd here (callers run it with grad
// off and attach the backward themselves).
at::Tensor change_one(const at::Tensor& local, const DeviceMesh& mesh, int i, const Placement& from,
                      const Placement& to, const std::vector<int64_t>& shape) {
  const GroupPtr group = mesh.get_group(i);
  const int k = mesh.size(i), me = mesh.get_local_rank(i);
  auto range = [&](int d, int j) { return shard_range(shape[d], k, j); };
  if (from == to) return local;
  if (from.is_shard() && to.is_replicate()) {  // all_gather
    const int d = from.dim;
    std::vector<at::Tensor> pieces;
    for (int j = 0; j < k; ++j) pieces.push_back(empty_piece(local, d, range(d, j).second));
    all_gather(pieces, local.contiguous(), group);
    return at::cat(pieces, d);
  }
  if (from.is_partial() && to.is_replicate()) {  // all_reduce
    at::Tensor out = local.contiguous().clone();
    all_reduce(out, from.reduce, group);
    return out;
  }
  if (from.is_partial() && to.is_shard()) {  // reduce_scatter
    const int d = to.dim;
    std::vector<at::Tensor> inputs;
    for (int j = 0; j < k; ++j) {
      const auto [start, length] = range(d, j);
      inputs.push_back(local.narrow(d, start, length).contiguous());
    }
    at::Tensor out = empty_piece(local, d, range(d, me).second);
    reduce_scatter(out, inputs, from.reduce, group);
    return out;
  }
  if (from.is_replicate() && to.is_shard()) {  // a local cut
    const auto [start, length] = range(to.dim, me);
    return local.narrow(to.dim, start, length).clone();
  }
  if (from.is_replicate() && to.is_partial()) {
    // Not reached from redistribute (which refuses it, as torch): the
    // reduction over the dimension gives the value back, torch's way.
    return to.reduce == ReduceOp::AVG ? local.clone() : local / k;
  }
  if (from.is_shard() && to.is_shard()) {  // all_to_all
    const int a = from.dim, b = to.dim;
    std::vector<at::Tensor> inputs, outputs;
    for (int j = 0; j < k; ++j) {
      const auto [start, length] = range(b, j);
      inputs.push_back(local.narrow(b, start, length).contiguous());
      at::Tensor out = empty_piece(local, a, range(a, j).second);
      std::vector<int64_t> sizes = out.sizes().vec();
      sizes[b] = range(b, me).second;
      outputs.push_back(at::empty(sizes, local.options()));
    }
    all_to_all(outputs, inputs, group);
    return at::cat(outputs, a);
  }
  // Shard or Partial to Partial of another kind: through Replicate.
  const at::Tensor whole = change_one(local, mesh, i, from, Replicate(), shape);
  return change_one(whole, mesh, i, Replicate(), to, shape);
}

// redistribute_local moves `local` from `from` to `to`, one mesh dimension
// at a time: first the dimensions whose change touches no tensor dimension
// another mesh dimension shards (a direct collective), then the others
// through Replicate.
at::Tensor redistribute_local(at::Tensor local, const DeviceMesh& mesh, const std::vector<Placement>& from,
                              const std::vector<Placement>& to, const std::vector<int64_t>& shape) {
  std::vector<Placement> now = from;
  const int n = mesh.ndim();
  auto direct_ok = [&](int i) {
    std::set<int> touched;
    if (now[i].is_shard()) touched.insert(now[i].dim);
    if (to[i].is_shard()) touched.insert(to[i].dim);
    for (int j = 0; j < n; ++j) {
      if (j != i && now[j].is_shard() && touched.count(now[j].dim)) return false;
    }
    return true;
  };
  for (int i = 0; i < n; ++i) {
    if (now[i] != to[i] && direct_ok(i)) {
      local = change_one(local, mesh, i, now[i], to[i], shape);
      now[i] = to[i];
    }
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = n - 1; i >= 0; --i) {
      if (now[i] == to[i]) continue;
      const Placement next = pass == 0 ? Replicate() : to[i];
      if (pass == 0 && !now[i].is_shard() && !now[i].is_partial()) continue;
      local = change_one(local, mesh, i, now[i], next, shape);
      now[i] = next;
    }
  }
  return local;
}

// as_gradient is the placements of a gradient of a tensor laid out as
// `placements`: a partial value's gradient is the whole gradient.
std::vector<Placement> as_gradient(std::vector<Placement> placements) {
  for (Placement& p : placements) {
    if (p.is_partial()) p = Replicate();
  }
  return placements;
}

// RedistributeBackward carries a gradient back through a redistribution:
// the redistribution back, Partial read as Replicate.
struct RedistributeBackward : public torch::autograd::Node {
  RedistributeBackward(DeviceMesh mesh_, std::vector<Placement> grad_from_, std::vector<Placement> grad_to_,
                       std::vector<int64_t> shape_)
      : mesh(std::move(mesh_)),
        grad_from(std::move(grad_from_)),
        grad_to(std::move(grad_to_)),
        shape(std::move(shape_)) {}
  std::string name() const override { return "cohort::RedistributeBackward"; }
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    at::NoGradGuard no_grad;
    return {redistribute_local(grads[0].contiguous(), mesh, grad_from, grad_to, shape)};
  }
  DeviceMesh mesh;
  std::vector<Placement> grad_from, grad_to;
  std::vector<int64_t> shape;
};

}  // namespace

std::pair<int64_t, int64_t> shard_range(int64_t size, int count, int index) {
  const int64_t piece = (size + count - 1) / count;
  const int64_t start = std::min(size, piece * index);
  return {start, std::min(size, start + piece) - start};
}

std::string Placement::to_string() const {
  switch (kind) {
    case Kind::kShard:
      return "Shard(dim=" + std::to_string(dim) + ")";
    case Kind::kReplicate:
      return "Replicate()";
    case Kind::kPartial:
      return std::string("Partial(") + (reduce == ReduceOp::AVG ? "avg" : "sum") + ")";
  }
  return "?";
}

Placement Shard(int dim) {
  Placement p;
  p.kind = Placement::Kind::kShard;
  p.dim = dim;
  return p;
}
Placement Replicate() {
  return Placement{};
}
Placement Partial(ReduceOp::Kind reduce) {
  Placement p;
  p.kind = Placement::Kind::kPartial;
  p.reduce = reduce;
  return p;
}

DTensor::DTensor(at::Tensor local, DeviceMesh mesh, std::vector<Placement> placements,
                 std::vector<int64_t> shape)
    : local_(std::move(local)),
      mesh_(std::move(mesh)),
      placements_(std::move(placements)),
      shape_(std::move(shape)) {}

DTensor DTensor::from_local(const at::Tensor& local, const DeviceMesh& mesh,
                            std::vector<Placement> placements, std::optional<std::vector<int64_t>> shape) {
  check_placements("DTensor::from_local", mesh, placements, local.dim());
  if (!mesh.get_coordinate()) {
    throw InvalidArgument("DTensor::from_local: rank " + std::to_string(mesh.get_rank()) +
                          " is not in the mesh");
  }
  std::vector<int64_t> global = local.sizes().vec();
  if (shape) {
    if (static_cast<int64_t>(shape->size()) != local.dim()) {
      throw InvalidArgument("DTensor::from_local: the shape " + shape_text(*shape) + " has " +
                            std::to_string(shape->size()) + " dimensions; the local tensor has " +
                            std::to_string(local.dim()));
    }
    global = *shape;
    const std::vector<int64_t> expected = local_shape(global, mesh, placements);
    if (expected != local.sizes().vec()) {
      throw InvalidArgument("DTensor::from_local: a tensor of shape " + shape_text(global) + " laid out as " +
                            placements_text(placements) + " has a piece of " + shape_text(expected) +
                            " on this rank, not " + shape_text(local.sizes().vec()));
    }
  } else {
    for (int i = 0; i < mesh.ndim(); ++i) {
      const Placement& p = placements[static_cast<size_t>(i)];
      if (p.is_shard()) global[p.dim] *= mesh.size(i);
    }
  }
  return DTensor(local, mesh, std::move(placements), std::move(global));
}

DTensor DTensor::redistribute(const std::vector<Placement>& placements) const {
  check_placements("DTensor::redistribute", mesh_, placements, static_cast<int64_t>(shape_.size()));
  if (placements == placements_) return *this;
  for (size_t i = 0; i < placements.size(); ++i) {
    if (placements[i].is_partial() && placements[i] != placements_[i]) {
      // As torch: a partial value comes from from_local or an operation.
      throw InvalidArgument("DTensor::redistribute: cannot lay out " + placements_text(placements_) + " as " +
                            placements_text(placements) +
                            "; redistributing to Partial is for internal use only");
    }
  }
  at::Tensor out;
  {
    at::NoGradGuard no_grad;
    out = redistribute_local(local_, mesh_, placements_, placements, shape_);
  }
  if (at::GradMode::is_enabled() && local_.requires_grad()) {
    auto node = c10::make_intrusive<RedistributeBackward>(mesh_, as_gradient(placements),
                                                          as_gradient(placements_), shape_);
    node->set_next_edges(torch::autograd::collect_next_edges(local_));
    torch::autograd::set_history(out, node);
  }
  return DTensor(out, mesh_, placements, shape_);
}

at::Tensor DTensor::full_tensor() const {
  return redistribute(std::vector<Placement>(placements_.size(), Replicate())).to_local();
}

std::string DTensor::to_string() const {
  return "DTensor(shape=" + shape_text(shape_) + ", placements=" + placements_text(placements_) +
         ", local=" + shape_text(local_.sizes().vec()) + ")";
}

DTensor distribute_tensor(const at::Tensor& tensor, const DeviceMesh& mesh,
                          const std::vector<Placement>& placements) {
  check_placements("distribute_tensor", mesh, placements, tensor.dim());
  for (const Placement& p : placements) {
    if (p.is_partial()) {
      throw InvalidArgument("distribute_tensor: " + placements_text(placements) +
                            " has a Partial placement; distribute as Replicate, then redistribute");
    }
  }
  if (!mesh.get_coordinate()) {
    throw InvalidArgument("distribute_tensor: rank " + std::to_string(mesh.get_rank()) +
                          " is not in the mesh");
  }
  at::Tensor whole;
  {
    at::NoGradGuard no_grad;
    whole = tensor.detach().contiguous().clone();
    // The first rank's data, dimension by dimension (torch's src_data_rank=0).
    for (int i = 0; i < mesh.ndim(); ++i) {
      const GroupPtr group = mesh.get_group(i);
      if (group->size() > 1) broadcast(whole, group->global_ranks().front(), group);
    }
  }
  const std::vector<int64_t> shape = tensor.sizes().vec();
  at::Tensor local = redistribute_local(whole, mesh, std::vector<Placement>(placements.size(), Replicate()),
                                        placements, shape);
  local = local.detach().requires_grad_(tensor.requires_grad());
  return DTensor::from_local(local, mesh, placements, shape);
}

}  // namespace cohort
