// dispatch_backend.h: one process group over several backends, chosen per
// operation by the device of its buffers, as torch's
// init_process_group(backend="cpu:gloo,cuda:nccl").
//
// The spec is a comma-separated list of DEVICE:BACKEND (devices cpu and
// cuda; cpu backends cohort (also native, gloo) and mpi; cuda backend
// nccl), or one plain backend name: "cohort", "mpi" (CPU buffers) or "nccl"
// (CUDA buffers).
#pragma once

#include <memory>
#include <string>

#include "process_group/backend.h"

namespace cohort {

// BackendSpec is a parsed spec: the backend of each device, "" for none.
struct BackendSpec {
  std::string cpu;   // "cohort" or "mpi"
  std::string cuda;  // "nccl"
  // canonical is the spec written back ("cpu:cohort,cuda:nccl", or the
  // plain name when there is one backend).
  std::string canonical() const;
};

// parse_backend_spec reads a spec, or returns InvalidArgument naming the
// unknown device or backend, a device given twice, or a backend that does
// not work on that device.
Result<BackendSpec> parse_backend_spec(const std::string& text);

class DispatchBackend : public Backend {
 public:
  // Either may be null (no backend for that device); not both.
  DispatchBackend(std::string name, std::unique_ptr<Backend> cpu, std::unique_ptr<Backend> cuda);

  Status broadcast(const Buffer& buffer, int root, const OpContext& op) override;
  Status all_reduce(const Buffer& buffer, ReduceOp reduce_op, const OpContext& op) override;
  Status all_reduce_coalesced(const std::vector<Buffer>& buffers, ReduceOp reduce_op,
                              const OpContext& op) override;
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
  // barrier runs on the CPU backend when there is one (torch's choice).
  Status barrier(const OpContext& op) override;
  void post_send(const Buffer& buffer, int dst, int tag, const OpContext& op, Completion done) override;
  void post_recv(const Buffer& buffer, int src, int tag, const OpContext& op, Completion done) override;
  bool has_pending() override;
  void progress(Deadline until) override;
  void wake() override;
  void abort(const Status& reason) override;
  std::vector<int> lost_peers() const override { return cpu_ ? cpu_->lost_peers() : cuda_->lost_peers(); }
  bool can_shrink() const override {
    return (!cpu_ || cpu_->can_shrink()) && (!cuda_ || cuda_->can_shrink());
  }
  bool may_run_inline() const override;
  bool supports_device(DeviceType type) const override { return backend_for(type) != nullptr; }
  // Fingerprints travel through the CPU backend when there is one.
  bool has_fingerprint_exchange() const override { return first()->has_fingerprint_exchange(); }
  Status exchange_fingerprints(const void* mine, size_t bytes, void* all, uint8_t* arrived,
                               const OpContext& op) override {
    return first()->exchange_fingerprints(mine, bytes, all, arrived, op);
  }
  // Symmetric memory is host memory: the CPU backend's.
  Result<std::shared_ptr<SymmetricMemory>> alloc_symmetric(Store* store, uint64_t id, size_t bytes,
                                                           Deadline deadline) override {
    return first()->alloc_symmetric(store, id, bytes, deadline);
  }
  std::string describe_links() const override;

 private:
  Backend* backend_for(DeviceType type) const;
  // first is the CPU backend, or the CUDA one where there is none.
  Backend* first() const { return cpu_ ? cpu_.get() : cuda_.get(); }
  // on returns the backend of `device`, or null after setting *st to the
  // error (ProcessGroup checks devices first, so that is a bug).
  Backend* on(const Device& device, Status* st) const;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Backend> cuda_;
};

}  // namespace cohort
