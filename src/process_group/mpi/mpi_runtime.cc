#include "process_group/mpi/mpi_runtime.h"

#include <cstdlib>

#include "common/logging.h"
#include "reduce/reduce.h"

namespace cohort::mpi {
namespace {

struct Runtime {
  std::once_flag once;
  Status init_status;
  int provided = MPI_THREAD_SINGLE;
  int rank = 0;
  int size = 1;
  std::mutex call_mu;  // held around each MPI call unless MPI_THREAD_MULTIPLE
  MPI_Datatype half = MPI_DATATYPE_NULL;
  MPI_Datatype bhalf = MPI_DATATYPE_NULL;
  MPI_Op half_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // SUM, PRODUCT, MIN, MAX
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

// The user ops for float16/bfloat16 use cohort's own kernels, which convert
// each pair to float32, combine and round back: the same arithmetic as the
// native backend, so results agree bit for bit step by step.
template <ReduceOp::Kind kKind>
void half_op(void* in, void* inout, int* len, MPI_Datatype* type) {
  const DType d = *type == runtime().bhalf ? DType::kBFloat16 : DType::kFloat16;
  reduce_into(d, kKind, inout, in, static_cast<size_t>(*len));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void initialize(Runtime& r) {
  int already = 0;
  MPI_Initialized(&already);
  if (already) {
    MPI_Query_thread(&r.provided);
  } else {
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &r.provided);
    if (rc != MPI_SUCCESS) {
      r.init_status =
          Status(StatusCode::kBackendError, "MPI_Init_thread failed (code " + std::to_string(rc) + ")");
      return;
    }
    std::atexit(finalize_at_exit);
  }
  if (r.provided < MPI_THREAD_SERIALIZED) {
    r.init_status = Status(StatusCode::kBackendError,
                           "MPI was initialised with thread level " + std::to_string(r.provided) +
                               "; the mpi backend needs MPI_THREAD_SERIALIZED or better (it calls MPI from "
                               "each group's worker thread)");
    return;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r.size);
  MPI_Type_contiguous(2, MPI_BYTE, &r.half);
  MPI_Type_commit(&r.half);
  MPI_Type_contiguous(2, MPI_BYTE, &r.bhalf);
  MPI_Type_commit(&r.bhalf);
  MPI_Op_create(&half_op<ReduceOp::SUM>, 1, &r.half_ops[0]);
  MPI_Op_create(&half_op<ReduceOp::PRODUCT>, 1, &r.half_ops[1]);
  MPI_Op_create(&half_op<ReduceOp::MIN>, 1, &r.half_ops[2]);
  MPI_Op_create(&half_op<ReduceOp::MAX>, 1, &r.half_ops[3]);
  COHORT_LOG(kDebug) << "MPI initialised: rank " << r.rank << " of " << r.size << ", thread level "
                     << (r.provided == MPI_THREAD_MULTIPLE ? "MULTIPLE" : "SERIALIZED");
}

}  // namespace

Status ensure_initialized() {
  Runtime& r = runtime();
  std::call_once(r.once, [&r] { initialize(r); });
  return r.init_status;
}

int world_rank() {
  return runtime().rank;
}
int world_size() {
  return runtime().size;
}

CallLock::CallLock() : locked_(runtime().provided < MPI_THREAD_MULTIPLE) {
  if (locked_) runtime().call_mu.lock();
}
CallLock::~CallLock() {
  if (locked_) runtime().call_mu.unlock();
}

MPI_Datatype datatype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kFloat16:
      return runtime().half;
    case DType::kBFloat16:
      return runtime().bhalf;
    case DType::kInt8:
      return MPI_INT8_T;
    case DType::kUInt8:
      return MPI_UINT8_T;
    case DType::kInt16:
      return MPI_INT16_T;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kBool:
      return MPI_C_BOOL;
  }
  return MPI_BYTE;
}

Result<MPI_Op> reduce_operation(DType dtype, ReduceOp::Kind kind) {
  if (kind == ReduceOp::AVG || kind == ReduceOp::PREMUL_SUM) kind = ReduceOp::SUM;
  if (dtype == DType::kBool) {
    // MPI's arithmetic ops are not defined on MPI_C_BOOL; torch treats bool
    // SUM/MAX/BOR as or, PRODUCT/MIN/BAND as and, BXOR as xor.
    switch (kind) {
      case ReduceOp::PRODUCT:
      case ReduceOp::MIN:
      case ReduceOp::BAND:
        return MPI_LAND;
      case ReduceOp::BXOR:
        return MPI_LXOR;
      default:
        return MPI_LOR;
    }
  }
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
    switch (kind) {
      case ReduceOp::SUM:
        return runtime().half_ops[0];
      case ReduceOp::PRODUCT:
        return runtime().half_ops[1];
      case ReduceOp::MIN:
        return runtime().half_ops[2];
      case ReduceOp::MAX:
        return runtime().half_ops[3];
      default:
        break;
    }
  } else {
    switch (kind) {
      case ReduceOp::SUM:
        return MPI_SUM;
      case ReduceOp::PRODUCT:
        return MPI_PROD;
      case ReduceOp::MIN:
        return MPI_MIN;
      case ReduceOp::MAX:
        return MPI_MAX;
      case ReduceOp::BAND:
        return MPI_BAND;
      case ReduceOp::BOR:
        return MPI_BOR;
      case ReduceOp::BXOR:
        return MPI_BXOR;
      default:
        break;
    }
  }
  ReduceOp op(kind);
  return invalid_argument(std::string("ReduceOp ") + reduce_op_name(op) + " on " + dtype_name(dtype) +
                          " is not supported by the mpi backend");
}

Status check(int rc, const char* call, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status::ok_status();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status(StatusCode::kBackendError, what + ": " + call + " failed: " + std::string(text, len));
}

}  // namespace cohort::mpi
