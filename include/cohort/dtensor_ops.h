// dtensor_ops.h: operations on DTensors (cohort/dtensor.h), each working
// on the local pieces and saying how its result is laid out: torch's
// sharding propagation, for what FSDP and tensor parallelism need.
//
//   auto x = distribute_tensor(input, mesh, {Replicate()});
//   auto w1 = distribute_tensor(fc1, mesh, {Shard(0)});   // column-wise: output features
//   auto w2 = distribute_tensor(fc2, mesh, {Shard(1)});   // row-wise: input features
//   auto h = relu(linear(x, w1));                         // Shard(1), no communication
//   auto y = linear(h, w2);                               // Partial(sum), no communication
//   y.full_tensor();                                      // one all_reduce
//
// Rules, one mesh dimension at a time (as torch.distributed.tensor's):
// - Elementwise (add, sub, mul of two DTensors of one shape; relu, gelu,
//   tanh, neg; mul by a number): equal placements stay; Shard and
//   Replicate give Shard (the replicated side is cut locally); two
//   different Shards lay the second out as the first. Partial stays
//   Partial where the operation is linear in it (add and sub of two
//   Partials, neg, mul by a number, mul of a Partial by a Replicate);
//   elsewhere a Partial input is reduced to Replicate first (an
//   all_reduce).
// - matmul(a [..., m, k], b [k, n]): a sharded on a row or batch dimension
//   with b replicated gives that Shard; a replicated with b sharded on
//   columns gives Shard on the last dimension; a sharded on k with b
//   sharded on k gives Partial(sum) (no communication: the reduction is
//   deferred); a Partial times a Replicate stays Partial. Other pairs
//   move an input first: k sharded on one side only cuts the other side;
//   otherwise both become Replicate.
// - linear(x, weight [out, in], bias [out]) is matmul(x, weight^T) + bias:
//   weight Shard(0) (column-wise) gives the output's last dimension
//   sharded, weight Shard(1) (row-wise) with x sharded on its last
//   dimension gives Partial, reduced to Replicate before the bias is added
//   (torch lays the bias out as Partial instead, a k-th on each rank; the
//   values are the same).
// - sum(a, dim): a dimension sharded by the mesh becomes Partial(sum);
//   the others keep their placement (renumbered when the dimension goes).
// - reshape and view: only dimensions before and after the part of the
//   shape that changes may be sharded; they keep their placement.
// - t(a), transpose of a 2-D DTensor: the shard dimension is swapped.
// Gradients flow through all of them (the local operations are ordinary
// autograd operations; the moves are redistributions, whose backward is
// the move back), and each comes back laid out as its input: a replicated
// input that met a sharded or partial partner has its gradient summed
// over that mesh dimension in backward (an all_reduce), so that a
// replicated weight of a batch-sharded input, or the replicated input of
// a column-sharded weight, gets the whole gradient on every rank. What no rule covers raises InvalidArgument
// naming the operation, the shapes and the placements.
#pragma once

#include <optional>
#include <vector>

#include "cohort/dtensor.h"

namespace cohort {

DTensor add(const DTensor& a, const DTensor& b);
DTensor sub(const DTensor& a, const DTensor& b);
DTensor mul(const DTensor& a, const DTensor& b);
DTensor mul(const DTensor& a, double factor);
DTensor neg(const DTensor& a);
DTensor relu(const DTensor& a);
DTensor gelu(const DTensor& a);
DTensor tanh(const DTensor& a);

DTensor matmul(const DTensor& a, const DTensor& b);
DTensor t(const DTensor& a);
DTensor linear(const DTensor& x, const DTensor& weight, const std::optional<DTensor>& bias = std::nullopt);

DTensor sum(const DTensor& a, int64_t dim, bool keepdim = false);
// sum of every element: a 0-D DTensor.
DTensor sum(const DTensor& a);

DTensor reshape(const DTensor& a, const std::vector<int64_t>& shape);
inline DTensor view(const DTensor& a, const std::vector<int64_t>& shape) {
  return reshape(a, shape);
}

}  // namespace cohort
