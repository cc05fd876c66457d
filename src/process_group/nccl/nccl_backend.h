// nccl_backend.h: the NCCL backend: collectives on CUDA device buffers
// (Buffer.device.type == kCUDA), one NCCL communicator and one CUDA stream
// per group.
//
// Bootstrap: the communicator is made at the group's first operation
// (every rank's first CUDA operation on a group is the same collective):
// rank 0 makes the ncclUniqueId and sets it in the group's store; the
// others get it from there.
//
// Waiting and errors: an operation is enqueued on the group's stream and a
// CUDA event recorded after it; the worker then polls the event, and
// ncclCommGetAsyncError, against the operation's deadline. A timeout or an
// asynchronous NCCL error aborts the communicator (ncclCommAbort) instead
// of hanging, fails the Work (TimeoutError / BackendError) and, through
// ProcessGroup, marks the group broken.
//
// Untested here: the machine that builds cohort has no GPU; the tests skip
// with a one-line reason when cudaGetDeviceCount finds none.
#pragma once

#include <memory>
#include <string>

#include "cohort/store.h"
#include "process_group/backend.h"

namespace cohort {

class NcclBackend : public Backend {
 public:
  NcclBackend(std::shared_ptr<Store> store, int rank, int size, std::string group);
  ~NcclBackend() override;
  // A shrunk group makes a new communicator of the survivors, as any new group.
  bool can_shrink() const override { return true; }

  Status broadcast(const Buffer& buffer, int root, const OpContext& op) override;
  Status all_reduce(const Buffer& buffer, ReduceOp reduce_op, const OpContext& op) override;
  Status reduce(const Buffer& buffer, int root, ReduceOp reduce_op, const OpContext& op) override;
  Status all_gather(const std::vector<Buffer>& outputs, const Buffer& input, const OpContext& op) override;
  Status gather(const std::vector<Buffer>& outputs, const Buffer& input, int root,
                const OpContext& op) override;
  Status scatter(const Buffer& output, const std::vector<Buffer>& inputs, int root,
                 const OpContext& op) override;
  Status reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs, ReduceOp reduce_op,
                        const OpContext& op) override;
  Status all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                    const OpContext& op) override;
  Status barrier(const OpContext& op) override;
  void abort(const Status& reason) override;
  // Every call on the group's worker: NCCL calls of one communicator must
  // not overlap, and waiting for the stream belongs to the worker.
  bool may_run_inline() const override { return false; }
  bool supports_device(DeviceType type) const override { return type == DeviceType::kCUDA; }

  // cuda_device_count is the number of CUDA devices, or an error saying why
  // there are none usable (no driver, no device).
  static Result<int> cuda_device_count();

 private:
  struct State;  // the CUDA and NCCL handles, so that this header needs neither
  Status ensure_comm(int device, const OpContext& op);
  std::shared_ptr<Store> store_;
  int rank_;
  int size_;
  std::string group_;
  std::unique_ptr<State> state_;
};

}  // namespace cohort
