#include "process_group/nccl/nccl_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "cohort/errors.h"
#include "common/elements.h"
#include "process_group/backend_module.h"

namespace cohort {
namespace {

Status cuda_failed(cudaError_t e, const char* call, const std::string& what) {
  return Status(StatusCode::kBackendError, what + ": " + call + " failed: " + cudaGetErrorString(e));
}

Status nccl_failed(ncclResult_t r, const char* call, const std::string& what) {
  return Status(StatusCode::kBackendError, what + ": " + call + " failed: " + ncclGetErrorString(r));
}

// A non-blocking communicator may answer ncclInProgress: the call is
// queued, and completion shows in ncclCommGetAsyncError.
bool nccl_ok(ncclResult_t r) {
  return r == ncclSuccess || r == ncclInProgress;
}

Result<ncclDataType_t> nccl_type(DType d) {
  switch (d) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt8:
      return ncclInt8;
    case DType::kUInt8:
    case DType::kBool:  // one byte, 0 or 1
      return ncclUint8;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kInt16:
      break;
  }
  return invalid_argument(std::string("dtype ") + dtype_name(d) +
                          " is not supported by the nccl backend (NCCL has no 16-bit integer type)");
}

// nccl_op maps a ReduceOp; PREMUL_SUM is made per call (premul_op).
Result<ncclRedOp_t> nccl_op(DType d, ReduceOp op) {
  if (d == DType::kBool) {
    // bool as uint8 0/1: or is max, and is min.
    if (op.kind == ReduceOp::SUM || op.kind == ReduceOp::MAX || op.kind == ReduceOp::BOR) return ncclMax;
    if (op.kind == ReduceOp::PRODUCT || op.kind == ReduceOp::MIN || op.kind == ReduceOp::BAND) return ncclMin;
  } else {
    switch (op.kind) {
      case ReduceOp::SUM:
        return ncclSum;
      case ReduceOp::PRODUCT:
        return ncclProd;
      case ReduceOp::MIN:
        return ncclMin;
      case ReduceOp::MAX:
        return ncclMax;
      case ReduceOp::AVG:
        return ncclAvg;
      default:
        break;
    }
  }
  return invalid_argument(std::string("ReduceOp ") + reduce_op_name(op) + " on " + dtype_name(d) +
                          " is not supported by the nccl backend (NCCL has no bitwise reductions)");
}

}  // namespace

struct NcclBackend::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  int device = -1;
  float* barrier_word = nullptr;  // one device float, for barrier
  std::atomic<bool> aborted{false};
  std::mutex mu;
  Status abort_reason;  // guarded by mu

  void abort_comm() {
    if (comm) ncclCommAbort(comm);  // also stops kernels waiting for peers
    comm = nullptr;
  }

  // wait polls the work enqueued so far against the deadline: the stream's
  // event, NCCL's asynchronous error, and abort(). On failure the
  // communicator is aborted.
  Status wait(const OpContext& op, const char* call) {
    cudaError_t e = cudaEventRecord(done, stream);
    if (e != cudaSuccess) return cuda_failed(e, "cudaEventRecord", *op.what);
    int spins = 0;
    for (;;) {
      e = cudaEventQuery(done);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (e == cudaSuccess && async == ncclSuccess) return Status::ok_status();
      if (e != cudaSuccess && e != cudaErrorNotReady) {
        abort_comm();
        return cuda_failed(e, call, *op.what);
      }
      if (!nccl_ok(async)) {
        abort_comm();
        return nccl_failed(async, call, *op.what);
      }
      if (aborted.load(std::memory_order_acquire)) {
        abort_comm();
        std::lock_guard<std::mutex> lock(mu);
        return abort_reason.with_context(*op.what);
      }
      if (op.deadline.expired()) {
        abort_comm();
        return Status(StatusCode::kTimeout, *op.what + ": " + call +
                                                " did not complete before the timeout; the NCCL communicator "
                                                "was aborted (ncclCommAbort)");
      }
      if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
};

NcclBackend::NcclBackend(std::shared_ptr<Store> store, int rank, int size, std::string group)
    : Backend("nccl"),
      store_(std::move(store)),
      rank_(rank),
      size_(size),
      group_(std::move(group)),
      state_(std::make_unique<State>()) {}

NcclBackend::~NcclBackend() {
  if (state_->comm) ncclCommDestroy(state_->comm);
  if (state_->barrier_word) cudaFree(state_->barrier_word);
  if (state_->done) cudaEventDestroy(state_->done);
  if (state_->stream) cudaStreamDestroy(state_->stream);
}

Result<int> NcclBackend::cuda_device_count() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    return Status(StatusCode::kBackendError,
                  std::string("no usable CUDA device: cudaGetDeviceCount failed: ") + cudaGetErrorString(e));
  }
  if (n == 0) return Status(StatusCode::kBackendError, "no CUDA device (cudaGetDeviceCount returned 0)");
  return n;
}

void NcclBackend::abort(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->abort_reason.ok()) state_->abort_reason = reason;
  }
  state_->aborted.store(true, std::memory_order_release);
}

Status NcclBackend::ensure_comm(int device, const OpContext& op) {
  State& s = *state_;
  if (s.aborted.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(s.mu);
    return s.abort_reason.with_context(*op.what);
  }
  if (s.comm) {
    if (device != s.device) {
      return invalid_argument(*op.what + ": the buffer is on cuda:" + std::to_string(device) + " but group " +
                              group_ + "'s NCCL communicator is on cuda:" + std::to_string(s.device));
    }
    return Status::ok_status();
  }
  if (s.device >= 0) {
    return Status(StatusCode::kBackendError,
                  *op.what + ": group " + group_ + "'s NCCL communicator was aborted");
  }
  auto count = cuda_device_count();
  if (!count.ok()) return count.status().with_context(*op.what);
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return cuda_failed(e, "cudaSetDevice", *op.what);
  s.device = device;
  if ((e = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking)) != cudaSuccess)
    return cuda_failed(e, "cudaStreamCreateWithFlags", *op.what);
  if ((e = cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming)) != cudaSuccess)
    return cuda_failed(e, "cudaEventCreateWithFlags", *op.what);
  // Bootstrap through the group's store: rank 0 publishes the unique id.
  ncclUniqueId id;
  const std::string key = "nccl_unique_id";
  try {
    if (rank_ == 0) {
      ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) return nccl_failed(r, "ncclGetUniqueId", *op.what);
      const auto* p = reinterpret_cast<const uint8_t*>(&id);
      store_->set(key, Bytes(p, p + sizeof id));
    } else {
      store_->wait({key}, op.deadline.as_timeout());
      Bytes b = store_->get(key);
      if (b.size() != sizeof id) {
        return Status(StatusCode::kBackendError, *op.what + ": the store's " + key + " holds " +
                                                     std::to_string(b.size()) + " bytes, not " +
                                                     std::to_string(sizeof id));
      }
      std::memcpy(&id, b.data(), sizeof id);
    }
  } catch (const Error& err) {
    return Status(StatusCode::kStoreError, *op.what + ": exchanging the ncclUniqueId: " + err.what());
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that a rank that never joins cannot hang us past the deadline
  ncclResult_t r = ncclCommInitRankConfig(&s.comm, size_, id, rank_, &config);
  if (!nccl_ok(r)) return nccl_failed(r, "ncclCommInitRankConfig", *op.what);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(s.comm, &state);
    if (state == ncclSuccess) return Status::ok_status();
    if (state != ncclInProgress) {
      s.abort_comm();
      return nccl_failed(state, "ncclCommInitRankConfig", *op.what);
    }
    if (op.deadline.expired()) {
      s.abort_comm();
      return Status(StatusCode::kTimeout, *op.what + ": making the NCCL communicator of group " + group_ +
                                              " timed out (did every rank join?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status NcclBackend::broadcast(const Buffer& buffer, int root, const OpContext& op) {
  auto type = nccl_type(buffer.dtype);
  if (!type.ok()) return type.status();
  Status st = ensure_comm(buffer.device.index, op);
  if (!st.ok()) return st;
  ncclResult_t r =
      ncclBroadcast(buffer.data, buffer.data, buffer.count, type.value(), root, state_->comm, state_->stream);
  return nccl_ok(r) ? state_->wait(op, "ncclBroadcast") : nccl_failed(r, "ncclBroadcast", *op.what);
}

// PremulOp is ncclRedOpCreatePreMulSum's op for one call, or the plain op.
struct PremulOp {
  ncclRedOp_t op;
  ncclComm_t comm = nullptr;  // set when `op` must be destroyed
  ~PremulOp() {
    if (comm) ncclRedOpDestroy(op, comm);
  }
};

static Status make_op(DType dtype, ReduceOp reduce_op, ncclComm_t comm, const std::string& what,
                      PremulOp* out) {
  auto type = nccl_type(dtype);
  if (!type.ok()) return type.status();
  if (reduce_op.kind == ReduceOp::PREMUL_SUM) {
    alignas(8) uint8_t scalar[8] = {};
    store_element(dtype, scalar, 0, reduce_op.factor);  // the scalar has the buffer's dtype
    ncclResult_t r = ncclRedOpCreatePreMulSum(&out->op, scalar, type.value(), ncclScalarHostImmediate, comm);
    if (r != ncclSuccess) return nccl_failed(r, "ncclRedOpCreatePreMulSum", what);
    out->comm = comm;
    return Status::ok_status();
  }
  auto op = nccl_op(dtype, reduce_op);
  if (!op.ok()) return op.status();
  out->op = op.value();
  return Status::ok_status();
}

Status NcclBackend::all_reduce(const Buffer& buffer, ReduceOp reduce_op, const OpContext& op) {
  Status st = ensure_comm(buffer.device.index, op);
  if (!st.ok()) return st;
  PremulOp nop;
  if (!(st = make_op(buffer.dtype, reduce_op, state_->comm, *op.what, &nop)).ok()) return st;
  ncclResult_t r = ncclAllReduce(buffer.data, buffer.data, buffer.count, nccl_type(buffer.dtype).value(),
                                 nop.op, state_->comm, state_->stream);
  return nccl_ok(r) ? state_->wait(op, "ncclAllReduce") : nccl_failed(r, "ncclAllReduce", *op.what);
}

Status NcclBackend::reduce(const Buffer& buffer, int root, ReduceOp reduce_op, const OpContext& op) {
  Status st = ensure_comm(buffer.device.index, op);
  if (!st.ok()) return st;
  PremulOp nop;
  if (!(st = make_op(buffer.dtype, reduce_op, state_->comm, *op.what, &nop)).ok()) return st;
  // In place on every rank: the non-roots' buffers are left as they were
  // only in the sense NCCL gives (it does not write recvbuff off the root).
  ncclResult_t r = ncclReduce(buffer.data, buffer.data, buffer.count, nccl_type(buffer.dtype).value(), nop.op,
                              root, state_->comm, state_->stream);
  return nccl_ok(r) ? state_->wait(op, "ncclReduce") : nccl_failed(r, "ncclReduce", *op.what);
}

Status NcclBackend::all_gather(const std::vector<Buffer>& outputs, const Buffer& input, const OpContext& op) {
  auto type = nccl_type(input.dtype);
  if (!type.ok()) return type.status();
  Status st = ensure_comm(input.device.index, op);
  if (!st.ok()) return st;
  // Uneven or scattered outputs: one broadcast per rank, grouped (torch
  // does the same); ncclAllGather needs equal counts back to back.
  ncclGroupStart();
  for (int q = 0; q < size_; ++q) {
    const void* send = q == rank_ ? input.data : outputs[q].data;
    ncclBroadcast(send, outputs[q].data, outputs[q].count, type.value(), q, state_->comm, state_->stream);
  }
  ncclResult_t r = ncclGroupEnd();
  return nccl_ok(r) ? state_->wait(op, "ncclBroadcast (all_gather)")
                    : nccl_failed(r, "ncclGroupEnd", *op.what);
}

Status NcclBackend::gather(const std::vector<Buffer>& outputs, const Buffer& input, int root,
                           const OpContext& op) {
  auto type = nccl_type(input.dtype);
  if (!type.ok()) return type.status();
  Status st = ensure_comm(input.device.index, op);
  if (!st.ok()) return st;
  ncclGroupStart();
  if (rank_ == root) {
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) {
        if (input.bytes() && outputs[q].data != input.data)
          cudaMemcpyAsync(outputs[q].data, input.data, input.bytes(), cudaMemcpyDeviceToDevice,
                          state_->stream);
      } else {
        ncclRecv(outputs[q].data, outputs[q].count, type.value(), q, state_->comm, state_->stream);
      }
    }
  } else {
    ncclSend(input.data, input.count, type.value(), root, state_->comm, state_->stream);
  }
  ncclResult_t r = ncclGroupEnd();
  return nccl_ok(r) ? state_->wait(op, "ncclSend/ncclRecv (gather)")
                    : nccl_failed(r, "ncclGroupEnd", *op.what);
}

Status NcclBackend::scatter(const Buffer& output, const std::vector<Buffer>& inputs, int root,
                            const OpContext& op) {
  auto type = nccl_type(output.dtype);
  if (!type.ok()) return type.status();
  Status st = ensure_comm(output.device.index, op);
  if (!st.ok()) return st;
  ncclGroupStart();
  if (rank_ == root) {
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) {
        if (output.bytes() && inputs[q].data != output.data)
          cudaMemcpyAsync(output.data, inputs[q].data, output.bytes(), cudaMemcpyDeviceToDevice,
                          state_->stream);
      } else {
        ncclSend(inputs[q].data, inputs[q].count, type.value(), q, state_->comm, state_->stream);
      }
    }
  } else {
    ncclRecv(output.data, output.count, type.value(), root, state_->comm, state_->stream);
  }
  ncclResult_t r = ncclGroupEnd();
  return nccl_ok(r) ? state_->wait(op, "ncclSend/ncclRecv (scatter)")
                    : nccl_failed(r, "ncclGroupEnd", *op.what);
}

Status NcclBackend::reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                   ReduceOp reduce_op, const OpContext& op) {
  Status st = ensure_comm(output.device.index, op);
  if (!st.ok()) return st;
  PremulOp nop;
  if (!(st = make_op(output.dtype, reduce_op, state_->comm, *op.what, &nop)).ok()) return st;
  const ncclDataType_t type = nccl_type(output.dtype).value();
  // One reduce per block, grouped: works for uneven and scattered blocks.
  ncclGroupStart();
  for (int q = 0; q < size_; ++q) {
    void* recv = q == rank_ ? output.data : inputs[q].data;  // only the root's is written
    ncclReduce(inputs[q].data, recv, inputs[q].count, type, nop.op, q, state_->comm, state_->stream);
  }
  ncclResult_t r = ncclGroupEnd();
  return nccl_ok(r) ? state_->wait(op, "ncclReduce (reduce_scatter)")
                    : nccl_failed(r, "ncclGroupEnd", *op.what);
}

Status NcclBackend::all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                               const OpContext& op) {
  auto type = nccl_type(inputs[0].dtype);
  if (!type.ok()) return type.status();
  Status st = ensure_comm(inputs[0].device.index, op);
  if (!st.ok()) return st;
  ncclGroupStart();
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) {
      if (inputs[q].bytes() && inputs[q].data != outputs[q].data)
        cudaMemcpyAsync(outputs[q].data, inputs[q].data, inputs[q].bytes(), cudaMemcpyDeviceToDevice,
                        state_->stream);
      continue;
    }
    ncclSend(inputs[q].data, inputs[q].count, type.value(), q, state_->comm, state_->stream);
    ncclRecv(outputs[q].data, outputs[q].count, type.value(), q, state_->comm, state_->stream);
  }
  ncclResult_t r = ncclGroupEnd();
  return nccl_ok(r) ? state_->wait(op, "ncclSend/ncclRecv (all_to_all)")
                    : nccl_failed(r, "ncclGroupEnd", *op.what);
}

Status NcclBackend::barrier(const OpContext& op) {
  // A barrier has no buffer: the device is the one the communicator has,
  // or the current one.
  int device = state_->device;
  if (device < 0) {
    auto count = cuda_device_count();
    if (!count.ok()) return count.status().with_context(*op.what);
    cudaGetDevice(&device);
  }
  Status st = ensure_comm(device, op);
  if (!st.ok()) return st;
  if (!state_->barrier_word) {
    cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&state_->barrier_word), sizeof(float));
    if (e != cudaSuccess) return cuda_failed(e, "cudaMalloc", *op.what);
  }
  ncclResult_t r = ncclAllReduce(state_->barrier_word, state_->barrier_word, 1, ncclFloat32, ncclSum,
                                 state_->comm, state_->stream);
  return nccl_ok(r) ? state_->wait(op, "ncclAllReduce (barrier)") : nccl_failed(r, "ncclAllReduce", *op.what);
}

// The module's entry (backend_module.h): libcohort loads this file's
// library the first time a group asks for NCCL.
namespace {

Result<std::unique_ptr<Backend>> make_backend(std::shared_ptr<Store> store, int rank, int size,
                                              std::chrono::milliseconds, const std::string& name) {
  if (!store) return Status(StatusCode::kBackendError, "the nccl backend needs a store to bootstrap");
  return std::unique_ptr<Backend>(std::make_unique<NcclBackend>(std::move(store), rank, size, name));
}

}  // namespace
}  // namespace cohort

extern "C" const cohort::BackendModule* cohort_nccl_module() {
  static const cohort::BackendModule table = [] {
    cohort::BackendModule t;
    t.make_nccl_backend = cohort::make_backend;
    return t;
  }();
  return &table;
}
