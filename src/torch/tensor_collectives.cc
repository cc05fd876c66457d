// tensor_collectives.cc: at::Tensor adapters over the Buffer API, with
// torch.distributed's signatures (see include/cohort/tensor.h).
#include <torch/serialize.h>

#include <algorithm>
#include <sstream>

#include "cohort/errors.h"
#include "cohort/tensor.h"

namespace cohort {
namespace {

std::string shape_text(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << ']';
  return out.str();
}

std::vector<Buffer> to_buffers(const std::vector<at::Tensor>& tensors, const char* what) {
  std::vector<Buffer> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(to_buffer(t, what));
  return out;
}

// keep_alive holds the tensors of an async call until its Work completes,
// as torch's Work does: the caller may drop its handles at once.
std::shared_ptr<Work> keep_alive(std::shared_ptr<Work> work, std::vector<at::Tensor> tensors) {
  if (!work->is_completed()) work->then([held = std::move(tensors)](Work&) mutable { held.clear(); });
  return work;
}

}  // namespace

DType to_dtype(at::ScalarType type, const char* what) {
  switch (type) {
    case at::kFloat:
      return DType::kFloat32;
    case at::kDouble:
      return DType::kFloat64;
    case at::kHalf:
      return DType::kFloat16;
    case at::kBFloat16:
      return DType::kBFloat16;
    case at::kChar:
      return DType::kInt8;
    case at::kByte:
      return DType::kUInt8;
    case at::kShort:
      return DType::kInt16;
    case at::kInt:
      return DType::kInt32;
    case at::kLong:
      return DType::kInt64;
    case at::kBool:
      return DType::kBool;
    default:
      throw InvalidArgument(std::string(what) + " has dtype " + c10::toString(type) +
                            ", which cohort does not communicate (use float32/64, float16, bfloat16, "
                            "int8/16/32/64, uint8 or bool)");
  }
}

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return at::kFloat;
    case DType::kFloat64:
      return at::kDouble;
    case DType::kFloat16:
      return at::kHalf;
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kInt8:
      return at::kChar;
    case DType::kUInt8:
      return at::kByte;
    case DType::kInt16:
      return at::kShort;
    case DType::kInt32:
      return at::kInt;
    case DType::kInt64:
      return at::kLong;
    case DType::kBool:
      return at::kBool;
  }
  return at::kFloat;
}

Buffer to_buffer(const at::Tensor& tensor, const char* what) {
  if (!tensor.defined()) throw InvalidArgument(std::string(what) + " is an undefined tensor");
  if (tensor.layout() != at::kStrided) {
    std::ostringstream layout;
    layout << tensor.layout();
    throw InvalidArgument(std::string(what) + " has layout " + layout.str() +
                          "; cohort communicates dense (strided) tensors, and all_reduce also sparse COO "
                          "ones (SUM)");
  }
  if (!tensor.is_contiguous()) {
    throw InvalidArgument(std::string(what) + " is not contiguous (shape " + shape_text(tensor.sizes()) +
                          ", strides " + shape_text(tensor.strides()) + "); call .contiguous() first");
  }
  Buffer b;
  b.dtype = to_dtype(tensor.scalar_type(), what);
  b.data = tensor.data_ptr();
  b.count = static_cast<size_t>(tensor.numel());
  if (tensor.is_cuda()) {
    b.device = Device{DeviceType::kCUDA, static_cast<int>(tensor.get_device())};
  } else if (!tensor.is_cpu()) {
    throw InvalidArgument(std::string(what) + " lives on device " + tensor.device().str() +
                          "; cohort communicates CPU and CUDA tensors");
  }
  return b;
}

namespace {

// all_reduce_sparse sums a sparse COO tensor over the group as Gloo does:
// every rank's coalesced indices and values are gathered (padded to the
// largest count of nonzeros), and their coalesced sum replaces the tensor's
// contents (it stays sparse). Blocking: its Work is complete on return.
std::shared_ptr<Work> all_reduce_sparse(const at::Tensor& tensor, ReduceOp op, const GroupPtr& group) {
  if (op.kind != ReduceOp::SUM) {
    throw InvalidArgument(std::string("all_reduce of a sparse tensor supports ReduceOp SUM only, got ") +
                          reduce_op_name(op));
  }
  const GroupPtr g = group ? group : default_group();
  at::Tensor input = tensor.coalesce();
  const int64_t nnz = input._nnz();
  // What every rank must agree on, and its count of nonzeros.
  std::vector<int64_t> meta = {nnz, input.sparse_dim(), input.dense_dim(),
                               static_cast<int64_t>(to_dtype(input.scalar_type(), "all_reduce's tensor"))};
  for (int64_t d : input.sizes()) meta.push_back(d);
  at::Tensor mine = at::tensor(meta, at::kLong);
  std::vector<at::Tensor> metas;
  for (int q = 0; q < g->size(); ++q) metas.push_back(at::empty_like(mine));
  all_gather(metas, mine, g)->wait();
  int64_t most = 0;
  for (int q = 0; q < g->size(); ++q) {
    const int64_t* theirs = metas[q].data_ptr<int64_t>();
    if (!std::equal(meta.begin() + 1, meta.end(), theirs + 1)) {
      throw InvalidArgument("all_reduce of a sparse tensor: rank " + std::to_string(q) + " has shape " +
                            shape_text(at::IntArrayRef(theirs + 4, meta.size() - 4)) + ", " +
                            std::to_string(theirs[1]) + " sparse dims, dtype " +
                            dtype_name(static_cast<DType>(theirs[3])) + "; this rank " +
                            shape_text(input.sizes()) + ", " + std::to_string(input.sparse_dim()) +
                            " sparse dims, dtype " + dtype_name(static_cast<DType>(meta[3])) +
                            " (every rank must pass the same)");
    }
    most = std::max(most, metas[q][0].item<int64_t>());
  }
  // Indices [sparse_dim, most] and values [most, dense sizes...], padded.
  at::Tensor indices = at::zeros({input.sparse_dim(), most}, at::kLong);
  indices.narrow(1, 0, nnz).copy_(input._indices());
  std::vector<int64_t> value_shape = input._values().sizes().vec();
  value_shape[0] = most;
  at::Tensor values = at::zeros(value_shape, input._values().options());
  values.narrow(0, 0, nnz).copy_(input._values());
  std::vector<at::Tensor> all_indices, all_values;
  for (int q = 0; q < g->size(); ++q) {
    all_indices.push_back(at::empty_like(indices));
    all_values.push_back(at::empty_like(values));
  }
  all_gather(all_indices, indices, g)->wait();
  std::shared_ptr<Work> last = all_gather(all_values, values, g);
  last->wait();
  for (int q = 0; q < g->size(); ++q) {
    const int64_t n = metas[q][0].item<int64_t>();
    all_indices[q] = all_indices[q].narrow(1, 0, n);
    all_values[q] = all_values[q].narrow(0, 0, n);
  }
  at::Tensor sum =
      at::sparse_coo_tensor(at::cat(all_indices, 1), at::cat(all_values, 0), input.sizes(), input.options())
          .coalesce();
  tensor.copy_(sum);
  return last;
}

}  // namespace

std::shared_ptr<Work> all_reduce(const at::Tensor& tensor, ReduceOp op, const GroupPtr& group,
                                 bool async_op) {
  if (tensor.defined() && tensor.layout() == at::kSparse) {
    const GroupPtr g = group ? group : default_group();
    if (!g->is_member()) return all_reduce(Buffer{}, AllReduceOptions{}, g);
    return all_reduce_sparse(tensor, op, g);
  }
  AllReduceOptions o;
  o.op = op;
  o.async_op = async_op;
  return keep_alive(all_reduce(to_buffer(tensor, "all_reduce's tensor"), o, group), {tensor});
}

std::shared_ptr<Work> all_reduce_coalesced(const std::vector<at::Tensor>& tensors, ReduceOp op,
                                           const GroupPtr& group, bool async_op) {
  AllReduceOptions o;
  o.op = op;
  o.async_op = async_op;
  return keep_alive(all_reduce_coalesced(to_buffers(tensors, "all_reduce_coalesced's tensor"), o, group),
                    tensors);
}

std::shared_ptr<Work> broadcast(const at::Tensor& tensor, int src, const GroupPtr& group, bool async_op) {
  BroadcastOptions o;
  o.src = src;
  o.async_op = async_op;
  return keep_alive(broadcast(to_buffer(tensor, "broadcast's tensor"), o, group), {tensor});
}

std::shared_ptr<Work> reduce(const at::Tensor& tensor, int dst, ReduceOp op, const GroupPtr& group,
                             bool async_op) {
  ReduceOptions o;
  o.dst = dst;
  o.op = op;
  o.async_op = async_op;
  return keep_alive(reduce(to_buffer(tensor, "reduce's tensor"), o, group), {tensor});
}

std::shared_ptr<Work> all_gather(const std::vector<at::Tensor>& tensor_list, const at::Tensor& tensor,
                                 const GroupPtr& group, bool async_op) {
  AllGatherOptions o;
  o.async_op = async_op;
  auto held = tensor_list;
  held.push_back(tensor);
  return keep_alive(all_gather(to_buffers(tensor_list, "all_gather's tensor_list entry"),
                               to_buffer(tensor, "all_gather's tensor"), o, group),
                    std::move(held));
}

std::shared_ptr<Work> all_gather_into_tensor(const at::Tensor& output, const at::Tensor& input,
                                             const GroupPtr& group, bool async_op) {
  AllGatherOptions o;
  o.async_op = async_op;
  return keep_alive(all_gather_into_tensor(to_buffer(output, "all_gather_into_tensor's output"),
                                           to_buffer(input, "all_gather_into_tensor's input"), o, group),
                    {output, input});
}

std::shared_ptr<Work> gather(const at::Tensor& tensor, const std::vector<at::Tensor>& gather_list, int dst,
                             const GroupPtr& group, bool async_op) {
  GatherOptions o;
  o.dst = dst;
  o.async_op = async_op;
  auto held = gather_list;
  held.push_back(tensor);
  return keep_alive(gather(to_buffers(gather_list, "gather's gather_list entry"),
                           to_buffer(tensor, "gather's tensor"), o, group),
                    std::move(held));
}

std::shared_ptr<Work> scatter(const at::Tensor& tensor, const std::vector<at::Tensor>& scatter_list, int src,
                              const GroupPtr& group, bool async_op) {
  ScatterOptions o;
  o.src = src;
  o.async_op = async_op;
  auto held = scatter_list;
  held.push_back(tensor);
  return keep_alive(scatter(to_buffer(tensor, "scatter's tensor"),
                            to_buffers(scatter_list, "scatter's scatter_list entry"), o, group),
                    std::move(held));
}

std::shared_ptr<Work> reduce_scatter(const at::Tensor& output, const std::vector<at::Tensor>& input_list,
                                     ReduceOp op, const GroupPtr& group, bool async_op) {
  ReduceScatterOptions o;
  o.op = op;
  o.async_op = async_op;
  auto held = input_list;
  held.push_back(output);
  return keep_alive(reduce_scatter(to_buffer(output, "reduce_scatter's output"),
                                   to_buffers(input_list, "reduce_scatter's input_list entry"), o, group),
                    std::move(held));
}

std::shared_ptr<Work> reduce_scatter_tensor(const at::Tensor& output, const at::Tensor& input, ReduceOp op,
                                            const GroupPtr& group, bool async_op) {
  ReduceScatterOptions o;
  o.op = op;
  o.async_op = async_op;
  return keep_alive(reduce_scatter_tensor(to_buffer(output, "reduce_scatter_tensor's output"),
                                          to_buffer(input, "reduce_scatter_tensor's input"), o, group),
                    {output, input});
}

std::shared_ptr<Work> all_to_all(const std::vector<at::Tensor>& output_tensor_list,
                                 const std::vector<at::Tensor>& input_tensor_list, const GroupPtr& group,
                                 bool async_op) {
  AllToAllOptions o;
  o.async_op = async_op;
  auto held = output_tensor_list;
  held.insert(held.end(), input_tensor_list.begin(), input_tensor_list.end());
  return keep_alive(all_to_all(to_buffers(output_tensor_list, "all_to_all's output entry"),
                               to_buffers(input_tensor_list, "all_to_all's input entry"), o, group),
                    std::move(held));
}

std::shared_ptr<Work> all_to_all_single(const at::Tensor& output, const at::Tensor& input,
                                        const std::vector<int64_t>& output_split_sizes,
                                        const std::vector<int64_t>& input_split_sizes, const GroupPtr& group,
                                        bool async_op) {
  // torch splits along the first dimension; the Buffer API counts elements.
  auto to_elements = [](const std::vector<int64_t>& rows, const at::Tensor& t, const char* what) {
    std::vector<size_t> out;
    const int64_t row = t.dim() == 0 || t.size(0) == 0 ? 1 : t.numel() / t.size(0);
    for (int64_t r : rows) {
      if (r < 0)
        throw InvalidArgument(std::string("all_to_all_single: ") + what + " has a negative size " +
                              std::to_string(r));
      out.push_back(static_cast<size_t>(r * row));
    }
    return out;
  };
  AllToAllOptions o;
  o.async_op = async_op;
  return keep_alive(all_to_all_single(to_buffer(output, "all_to_all_single's output"),
                                      to_buffer(input, "all_to_all_single's input"),
                                      to_elements(output_split_sizes, output, "output_split_sizes"),
                                      to_elements(input_split_sizes, input, "input_split_sizes"), o, group),
                    {output, input});
}

void send(const at::Tensor& tensor, int dst, const GroupPtr& group, int tag) {
  P2POptions o;
  o.tag = tag;
  send(to_buffer(tensor, "send's tensor"), dst, o, group);
}

int recv(const at::Tensor& tensor, int src, const GroupPtr& group, int tag) {
  P2POptions o;
  o.tag = tag;
  auto work = recv(to_buffer(tensor, "recv's tensor"), src, o, group);
  const GroupPtr g = group ? group : default_group();
  if (!g->is_member()) return -1;
  const int from = work->source_rank();
  return from >= 0 ? get_global_rank(g, from) : src;
}

std::shared_ptr<Work> isend(const at::Tensor& tensor, int dst, const GroupPtr& group, int tag) {
  return keep_alive(isend(to_buffer(tensor, "isend's tensor"), dst, tag, group), {tensor});
}

std::shared_ptr<Work> irecv(const at::Tensor& tensor, int src, const GroupPtr& group, int tag) {
  return keep_alive(irecv(to_buffer(tensor, "irecv's tensor"), src, tag, group), {tensor});
}

std::vector<std::shared_ptr<Work>> batch_isend_irecv(const std::vector<TensorP2POp>& ops,
                                                     const GroupPtr& group) {
  std::vector<P2POp> buffers;
  buffers.reserve(ops.size());
  for (const auto& op : ops) {
    buffers.push_back(
        P2POp{op.kind, to_buffer(op.tensor, op.kind == P2POp::kSend ? "isend's tensor" : "irecv's tensor"),
              op.peer, op.tag});
  }
  std::vector<std::shared_ptr<Work>> works = batch_isend_irecv(buffers, group);
  for (size_t i = 0; i < works.size(); ++i) keep_alive(works[i], {ops[i].tensor});
  return works;
}

namespace {

Bytes pickled(const c10::IValue& value) {
  const std::vector<char> bytes = torch::pickle_save(value);
  return Bytes(bytes.begin(), bytes.end());
}

c10::IValue unpickled(const Bytes& bytes) {
  return torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
}

std::vector<Bytes> pickled_all(const std::vector<c10::IValue>& values) {
  std::vector<Bytes> out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back(pickled(v));
  return out;
}

void unpickle_into(const std::vector<Bytes>& bytes, std::vector<c10::IValue>& values) {
  for (size_t i = 0; i < bytes.size() && i < values.size(); ++i) values[i] = unpickled(bytes[i]);
}

}  // namespace

void all_gather_object(std::vector<c10::IValue>& object_list, const c10::IValue& obj, const GroupPtr& group) {
  std::vector<Bytes> bytes(object_list.size());
  all_gather_object(bytes, pickled(obj), group);
  if (group && !group->is_member()) return;
  unpickle_into(bytes, object_list);
}

void broadcast_object_list(std::vector<c10::IValue>& object_list, int src, const GroupPtr& group) {
  const GroupPtr g = group ? group : default_group();
  if (!g->is_member()) return;
  std::vector<Bytes> bytes =
      g->rank() == get_group_rank(g, src) ? pickled_all(object_list) : std::vector<Bytes>(object_list.size());
  broadcast_object_list(bytes, src, g);
  unpickle_into(bytes, object_list);
}

void gather_object(const c10::IValue& obj, std::vector<c10::IValue>* object_gather_list, int dst,
                   const GroupPtr& group) {
  const GroupPtr g = group ? group : default_group();
  if (!g->is_member()) return;
  const bool root = g->rank() == get_group_rank(g, dst);
  std::vector<Bytes> bytes(root && object_gather_list ? object_gather_list->size() : 0);
  gather_object(pickled(obj), root && object_gather_list ? &bytes : nullptr, dst, g);
  if (root) unpickle_into(bytes, *object_gather_list);
}

void scatter_object_list(std::vector<c10::IValue>& scatter_object_output_list,
                         const std::vector<c10::IValue>& scatter_object_input_list, int src,
                         const GroupPtr& group) {
  std::vector<Bytes> out(scatter_object_output_list.size());
  scatter_object_list(out, pickled_all(scatter_object_input_list), src, group);
  const GroupPtr g = group ? group : default_group();
  if (!g->is_member() || out.empty()) return;
  scatter_object_output_list[0] = unpickled(out[0]);
}

}  // namespace cohort
