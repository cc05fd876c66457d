// tensor.h: torch.distributed's tensor-level API for libtorch programs.
//
// The core API works on Buffer views; these functions take at::Tensor with
// the signatures of torch.distributed's module-level functions (src and dst
// are global ranks, the group defaults to the default group, async_op
// returns a Work to wait on):
//
//   auto t = torch::ones({4});
//   cohort::all_reduce(t);                             // SUM in place
//   cohort::broadcast(t, /*src=*/0);
//   std::vector<at::Tensor> parts(cohort::get_world_size(), torch::empty({4}));
//   cohort::all_gather(parts, t);
//
// Tensors must be contiguous and of a dtype cohort knows (float32/64,
// float16, bfloat16, int8/16/32/64, uint8, bool); anything else raises
// InvalidArgument naming the argument, its dtype or its strides. An async
// call keeps its tensors alive until its Work completes.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/object_collectives.h"

namespace cohort {

// to_buffer views a contiguous tensor as a Buffer. `what` names the
// argument in errors ("all_reduce's tensor").
Buffer to_buffer(const at::Tensor& tensor, const char* what = "tensor");
// to_dtype maps a torch scalar type to cohort's (InvalidArgument if none).
DType to_dtype(at::ScalarType type, const char* what = "tensor");
// to_scalar_type maps back.
at::ScalarType to_scalar_type(DType dtype);

std::shared_ptr<Work> all_reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::SUM,
                                 const GroupPtr& group = nullptr, bool async_op = false);
// all_reduce_coalesced reduces several tensors of one dtype as one
// operation (torch's all_reduce_coalesced(tensors, op, group, async_op)).
std::shared_ptr<Work> all_reduce_coalesced(const std::vector<at::Tensor>& tensors,
                                           ReduceOp op = ReduceOp::SUM, const GroupPtr& group = nullptr,
                                           bool async_op = false);
std::shared_ptr<Work> broadcast(const at::Tensor& tensor, int src, const GroupPtr& group = nullptr,
                                bool async_op = false);
std::shared_ptr<Work> reduce(const at::Tensor& tensor, int dst, ReduceOp op = ReduceOp::SUM,
                             const GroupPtr& group = nullptr, bool async_op = false);
// all_gather: tensor_list[q] receives rank q's tensor.
std::shared_ptr<Work> all_gather(const std::vector<at::Tensor>& tensor_list, const at::Tensor& tensor,
                                 const GroupPtr& group = nullptr, bool async_op = false);
std::shared_ptr<Work> all_gather_into_tensor(const at::Tensor& output, const at::Tensor& input,
                                             const GroupPtr& group = nullptr, bool async_op = false);
// gather: gather_list is used on dst only (empty elsewhere).
std::shared_ptr<Work> gather(const at::Tensor& tensor, const std::vector<at::Tensor>& gather_list, int dst,
                             const GroupPtr& group = nullptr, bool async_op = false);
// scatter: scatter_list is used on src only (empty elsewhere).
std::shared_ptr<Work> scatter(const at::Tensor& tensor, const std::vector<at::Tensor>& scatter_list, int src,
                              const GroupPtr& group = nullptr, bool async_op = false);
std::shared_ptr<Work> reduce_scatter(const at::Tensor& output, const std::vector<at::Tensor>& input_list,
                                     ReduceOp op = ReduceOp::SUM, const GroupPtr& group = nullptr,
                                     bool async_op = false);
std::shared_ptr<Work> reduce_scatter_tensor(const at::Tensor& output, const at::Tensor& input,
                                            ReduceOp op = ReduceOp::SUM, const GroupPtr& group = nullptr,
                                            bool async_op = false);
std::shared_ptr<Work> all_to_all(const std::vector<at::Tensor>& output_tensor_list,
                                 const std::vector<at::Tensor>& input_tensor_list,
                                 const GroupPtr& group = nullptr, bool async_op = false);
// all_to_all_single: split sizes count rows (the first dimension), as torch's.
std::shared_ptr<Work> all_to_all_single(const at::Tensor& output, const at::Tensor& input,
                                        const std::vector<int64_t>& output_split_sizes = {},
                                        const std::vector<int64_t>& input_split_sizes = {},
                                        const GroupPtr& group = nullptr, bool async_op = false);
void send(const at::Tensor& tensor, int dst, const GroupPtr& group = nullptr, int tag = 0);
// recv returns the sender's rank (useful with kAnySourceRank); -1 on a
// group this rank is not a member of, as torch.
int recv(const at::Tensor& tensor, int src = kAnySourceRank, const GroupPtr& group = nullptr, int tag = 0);
std::shared_ptr<Work> isend(const at::Tensor& tensor, int dst, const GroupPtr& group = nullptr, int tag = 0);
std::shared_ptr<Work> irecv(const at::Tensor& tensor, int src = kAnySourceRank,
                            const GroupPtr& group = nullptr, int tag = 0);

// The object collectives of cohort/object_collectives.h for torch::IValue
// (tensors, scalars, strings, lists, dicts, tuples), each serialized with
// torch's pickler (torch::pickle_save, the format torch::pickle_load and
// torch.load read); same arguments and semantics.
void all_gather_object(std::vector<c10::IValue>& object_list, const c10::IValue& obj,
                       const GroupPtr& group = nullptr);
void broadcast_object_list(std::vector<c10::IValue>& object_list, int src = 0,
                           const GroupPtr& group = nullptr);
void gather_object(const c10::IValue& obj, std::vector<c10::IValue>* object_gather_list, int dst = 0,
                   const GroupPtr& group = nullptr);
void scatter_object_list(std::vector<c10::IValue>& scatter_object_output_list,
                         const std::vector<c10::IValue>& scatter_object_input_list, int src = 0,
                         const GroupPtr& group = nullptr);

// TensorP2POp is one entry of batch_isend_irecv, torch's
// P2POp(dist.isend or dist.irecv, tensor, peer, tag): `peer` is a global
// rank.
struct TensorP2POp {
  P2POp::Kind kind;  // P2POp::kSend (isend) or P2POp::kRecv (irecv)
  at::Tensor tensor;
  int peer;
  int tag = 0;
};
// batch_isend_irecv starts every op at once, so that their order cannot
// deadlock, and returns one Work per op (torch's batch_isend_irecv(ops),
// all ops on `group`). The tensors stay alive until their Works complete.
std::vector<std::shared_ptr<Work>> batch_isend_irecv(const std::vector<TensorP2POp>& ops,
                                                     const GroupPtr& group = nullptr);

}  // namespace cohort
