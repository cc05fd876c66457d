// c10d_backend.h: cohort as a torch.distributed backend. CohortBackend is a
// c10d::Backend (torch 2.x's extension point) over a cohort ProcessGroup
// made through the store torch hands it, so every c10d call a Python
// program makes (torch.distributed.*, DDP, FSDP, DTensor) runs on cohort's
// shared-memory and TCP data plane, with cohort's errors.
//
// Ranks and sizes are the group's, as c10d gives them. A call with
// asyncOp=false (torch's blocking calls) runs at once on the caller's
// thread and returns a completed Work; an async one returns at once and
// keeps its tensors alive until it completes. Each Work's future (DDP's
// reducer and comm hooks wait on it) completes with the output tensors.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cohort/process_group.h"

namespace cohort_torch {

class CohortBackend : public c10d::Backend {
 public:
  // Joins the group: blocks until every rank of it has (or `timeout`).
  CohortBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                std::chrono::milliseconds timeout, const std::string& group_name);
  ~CohortBackend() override;

  const std::string getBackendName() const override { return "cohort"; }
  const std::shared_ptr<cohort::ProcessGroup>& group() const { return group_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  // Sequence numbers: the cohort group's count of collectives, the same on
  // every rank (torch's debug wrapper and object collectives compare them).
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  // abort fails what is running and queued at once; shutdown (torch's
  // destroy_process_group) first lets the operations in flight end, each
  // within its own timeout, then takes the group down the same way.
  void abort() override;
  void shutdown() override;

  // alloc_symmetric is ProcessGroup::alloc_symmetric as a uint8 tensor of
  // `bytes` that owns the block: collectives on tensors inside it read the
  // other ranks' blocks in place. Collective over the group.
  at::Tensor alloc_symmetric(int64_t bytes);

  // set_profiling_name names the profiler's events "<name>:<op>"; set once,
  // before the group's first call.
  void set_profiling_name(const std::string& name) { profiling_name_ = name; }

  // Coalescing (torch's _coalescing_manager and batch_isend_irecv): the
  // calls between startCoalescing and endCoalescing run asynchronously, all
  // in flight together, and endCoalescing's Work ends with the last.
  // Called from one thread, the one that makes the calls.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

 private:
  using WorkList = std::vector<std::shared_ptr<cohort::Work>>;

  // async_op: a call runs asynchronously when torch asks, or when coalescing.
  bool async_op(bool requested) const { return requested || coalescing_; }
  // finish wraps `works` for torch (its future completes with `outputs`),
  // keeps `keep` alive until they complete, and records them when coalescing.
  // `op` names the profiler's event ("<profiling name>:<op>", recording
  // `inputs`' shapes), made only while a profiler listens.
  c10::intrusive_ptr<c10d::Work> finish(c10d::OpType type, const char* op, WorkList works,
                                        std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
                                        const std::vector<at::Tensor>& inputs);
  // pairwise runs `one` (an async call) on each (output, input) pair of a
  // coalesced call, all in flight together; the Work ends with the last.
  template <class One>
  c10::intrusive_ptr<c10d::Work> pairwise(const char* profiled_op, const std::string& op, std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs, One&& one);

  std::shared_ptr<cohort::ProcessGroup> group_;
  // The profiler's events are "<profiling_name_>:<op>": "cohort", or the
  // name cohort stands in for (as_gloo.py sets "gloo").
  std::string profiling_name_ = "cohort";
  bool coalescing_ = false;
  // The Works handed to torch that had not completed then: shutdown()
  // waits for those still running. Pruned as calls are made.
  std::mutex in_flight_mu_;
  std::vector<std::weak_ptr<cohort::Work>> in_flight_;
  WorkList coalesced_works_;                   // the Works made while coalescing
  std::vector<at::Tensor> coalesced_outputs_;  // and their outputs
};

// CohortProcessGroup is the ProcessGroup torch keeps for a group made with
// the backend "cohort" alone: torch keeps a ProcessGroup that a backend's
// creator returns as it is, and this one names itself "cohort" (torch's own
// ProcessGroup calls every plugin "custom", which DDP's logging data and
// the sequence-number queries would report). Its CPU backend is `backend`.
class CohortProcessGroup : public c10d::ProcessGroup {
 public:
  CohortProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, const c10::intrusive_ptr<CohortBackend>& backend);

  const std::string getBackendName() const override { return "cohort"; }
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
};

}  // namespace cohort_torch
