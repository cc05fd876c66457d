// process_group.h: a group of ranks and every collective and point-to-point
// operation on it, with torch.distributed's semantics.
//
// Each call checks its arguments on the calling thread (InvalidArgument
// before anything is sent), gets the group's next sequence number, and is
// queued to the group's worker, which runs the group's operations one after
// another in call order (a blocking collective on an idle group runs on the
// calling thread instead, in the same order). Every call returns a Work;
// with async_op=false it has already completed (and thrown, if it failed);
// a blocking collective that succeeded may return one complete Work shared
// by such calls (torch returns None for them). isend/irecv never hold
// up the operations queued after them. After a timeout, a dead peer or a
// desync the group refuses new work: create a new one.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/symmetric_memory.h"
#include "cohort/types.h"
#include "cohort/work.h"

namespace cohort {

class Backend;
class DesyncCheck;
class Store;
struct Fingerprint;
struct OpContext;
struct OpShape;
enum class CollectiveCall : uint8_t;  // src/common/collective.h
class GroupTrace;
class MonitorLease;

// CollectiveOptions are what every call takes: a timeout (0: the group's)
// and whether to return before the operation completes.
struct CollectiveOptions {
  std::chrono::milliseconds timeout{0};
  bool async_op = false;
};

struct BroadcastOptions : CollectiveOptions {
  int src = 0;  // group rank
};
struct AllReduceOptions : CollectiveOptions {
  ReduceOp op = ReduceOp::SUM;
};
struct ReduceOptions : CollectiveOptions {
  int dst = 0;
  ReduceOp op = ReduceOp::SUM;
};
struct GatherOptions : CollectiveOptions {
  int dst = 0;
};
struct ScatterOptions : CollectiveOptions {
  int src = 0;
};
struct ReduceScatterOptions : CollectiveOptions {
  ReduceOp op = ReduceOp::SUM;
};
using AllGatherOptions = CollectiveOptions;
using AllToAllOptions = CollectiveOptions;
using BarrierOptions = CollectiveOptions;
// P2POptions: `tag` must match between send and recv (torch's default 0).
struct P2POptions : CollectiveOptions {
  int tag = 0;
};

// P2POp is one entry of batch_isend_irecv (torch.distributed.P2POp).
struct P2POp {
  enum Kind { kSend, kRecv };
  Kind kind;
  Buffer buffer;
  int peer;  // group rank
  int tag = 0;
};

// kAnySourceRank, as recv's source, receives from whichever rank sends first
// (Work::source_rank() tells which).
constexpr int kAnySourceRank = -1;

class ProcessGroup {
 public:
  // Used by init_process_group and new_group; `global_ranks[i]` is the
  // global rank of group rank i. `store` is the group's own (prefixed)
  // store, which the debugging tools and shrink() use; null where the
  // backend needed none (MPI alone).
  ProcessGroup(std::unique_ptr<Backend> backend, int rank, std::vector<int> global_ranks, std::string name,
               std::chrono::milliseconds timeout, std::shared_ptr<Store> store = nullptr);
  // Fails queued work with a clear error and stops the worker.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // non_member is what new_group gives a rank outside `global_ranks`
  // (torch's GroupMember.NON_GROUP_MEMBER): a handle that knows the group's
  // ranks and name but is not a member. Every collective and point-to-point
  // call on it does nothing and returns a completed Work at once (as torch
  // returns None); rank() and size() are -1; alloc_symmetric throws.
  static std::shared_ptr<ProcessGroup> non_member(std::vector<int> global_ranks, std::string name);
  // is_member is false for the handle non_member() makes.
  bool is_member() const;

  // rank and size in this group; -1 on a non-member's handle.
  int rank() const;
  int size() const;
  const std::string& name() const;
  const std::vector<int>& global_ranks() const;
  std::chrono::milliseconds timeout() const;
  const std::shared_ptr<Store>& store() const;
  // backend_name is the backend that runs the group ("cohort", "mpi",
  // "nccl", or "cpu:...,cuda:..."); empty on a non-member's handle.
  std::string backend_name() const;
  // sequence_number is how many collectives were issued on this group (the
  // same on every rank when they agree; point-to-point is counted apart).
  uint64_t sequence_number() const;

  std::shared_ptr<Work> broadcast(const Buffer& buffer, const BroadcastOptions& options = {});
  std::shared_ptr<Work> all_reduce(const Buffer& buffer, const AllReduceOptions& options = {});
  // all_reduce_coalesced reduces several CPU buffers of one dtype as one
  // (torch's all_reduce_coalesced): each rank's split into buffers may
  // differ, the total may not. On one host the ranks read each other's
  // buffers where they are, so nothing is packed (DDP reduces gradients so).
  std::shared_ptr<Work> all_reduce_coalesced(const std::vector<Buffer>& buffers,
                                             const AllReduceOptions& options = {});
  std::shared_ptr<Work> reduce(const Buffer& buffer, const ReduceOptions& options = {});
  // all_gather: outputs[q] receives rank q's input; counts may differ by rank.
  std::shared_ptr<Work> all_gather(const std::vector<Buffer>& outputs, const Buffer& input,
                                   const AllGatherOptions& options = {});
  // all_gather_into_tensor: output holds size() inputs back to back.
  std::shared_ptr<Work> all_gather_into_tensor(const Buffer& output, const Buffer& input,
                                               const AllGatherOptions& options = {});
  // gather: on dst, outputs[q] receives rank q's input; elsewhere outputs is empty.
  std::shared_ptr<Work> gather(const std::vector<Buffer>& outputs, const Buffer& input,
                               const GatherOptions& options = {});
  // scatter: on src, inputs[q] goes to rank q; elsewhere inputs is empty.
  std::shared_ptr<Work> scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                const ScatterOptions& options = {});
  // reduce_scatter: output = reduction over ranks of inputs[rank()].
  std::shared_ptr<Work> reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                       const ReduceScatterOptions& options = {});
  // reduce_scatter_tensor: input holds size() blocks of output's count.
  std::shared_ptr<Work> reduce_scatter_tensor(const Buffer& output, const Buffer& input,
                                              const ReduceScatterOptions& options = {});
  // all_to_all: inputs[q] goes to rank q, which receives it in outputs[rank()].
  std::shared_ptr<Work> all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                                   const AllToAllOptions& options = {});
  // all_to_all_single: split sizes in elements; empty means equal splits.
  std::shared_ptr<Work> all_to_all_single(const Buffer& output, const Buffer& input,
                                          const std::vector<size_t>& output_split_sizes = {},
                                          const std::vector<size_t>& input_split_sizes = {},
                                          const AllToAllOptions& options = {});
  std::shared_ptr<Work> barrier(const BarrierOptions& options = {});

  // monitored_barrier is torch's debugging barrier: rank 0 waits for every
  // other rank (within options.timeout, or the group's) and then releases
  // them. A rank that does not arrive makes rank 0 throw TimeoutError naming
  // it (every missing rank with wait_all_ranks; the first otherwise), and
  // the others fail with that reason. Synchronous, as torch's.
  void monitored_barrier(const BarrierOptions& options = {}, bool wait_all_ranks = false);

  std::shared_ptr<Work> send(const Buffer& buffer, int dst, const P2POptions& options = {});
  // recv from `src`, or from any rank with kAnySourceRank.
  std::shared_ptr<Work> recv(const Buffer& buffer, int src, const P2POptions& options = {});
  std::shared_ptr<Work> isend(const Buffer& buffer, int dst, int tag = 0);
  std::shared_ptr<Work> irecv(const Buffer& buffer, int src, int tag = 0);
  // batch_isend_irecv starts every op at once (so their order cannot
  // deadlock) and returns one Work per op.
  std::vector<std::shared_ptr<Work>> batch_isend_irecv(const std::vector<P2POp>& ops);

  // alloc_symmetric gives this rank a zero-filled block of `bytes` that the
  // group's other ranks on this host map too (symmetric_memory.h):
  // collectives on buffers inside such blocks read each other's data in
  // place. Collective: every rank of the group calls it, in the same order
  // and with the same size (it synchronises the ranks of each host, within
  // `timeout`, 0: the group's). Where the ranks cannot share memory the
  // block is ordinary memory (shared() false). Throws on timeout or a
  // store failure.
  std::shared_ptr<SymmetricMemory> alloc_symmetric(size_t bytes, std::chrono::milliseconds timeout = {});

  // stragglers_json says, as a JSON object, who this group's ranks wait
  // for (docs/stragglers.md): this rank's own counts and the group's last
  // summary ("summary", null until the group's rank 0 has joined the
  // ranks' times, about COHORT_STRAGGLER_INTERVAL_S after the first
  // collectives). Reads only what this process holds: no store call.
  std::string stragglers_json() const;

  // abort fails the running and queued operations at once and makes the
  // group refuse new ones. Thread-safe.
  void abort(const std::string& reason = "abort() was called");

  // lost_ranks lists the group ranks whose connection ended while this rank
  // was still healthy, and those on this host whose process is gone: the
  // ranks it saw die (or fail) first. Thread-safe.
  std::vector<int> lost_ranks() const;
  // can_shrink says whether shrink_group can rebuild this group without
  // some of its ranks (not with MPI, which has no ULFM here).
  bool can_shrink() const;

 private:
  struct NonMemberTag {};
  ProcessGroup(NonMemberTag, std::vector<int> global_ranks, std::string name);

  using Task = std::function<void()>;
  // enqueue numbers an operation and queues `run` for the worker; waits
  // for it unless options.async_op. `shape` is what the flight recorder
  // keeps of its arguments.
  std::shared_ptr<Work> enqueue(std::string_view op, const OpShape& shape, const CollectiveOptions& options,
                                std::function<void(Work&, const OpContext&)> run, bool is_collective);
  // collective is every collective's one way in (process_group_ops.cc):
  // on a non-member it does nothing (torch's rule); otherwise
  // `prepare(op)`, `op` the call's name, checks the arguments, throwing InvalidArgument, and
  // returns the call (its shape, its fingerprint, the backend call), which
  // runs after COHORT_DEBUG=detail's desync check. A new collective written
  // through it can skip neither.
  template <class Prepare>
  std::shared_ptr<Work> collective(CollectiveCall call, const CollectiveOptions& options, Prepare prepare);
  // run_collective runs a backend call that returns a Status: at once on
  // the caller's thread when the call blocks and the group is idle
  // (without allocating: it returns done_work_), else through enqueue.
  template <class Run>
  std::shared_ptr<Work> run_collective(std::string_view op, const OpShape& shape,
                                       const CollectiveOptions& options, Run run);
  // claim_inline numbers a blocking collective and makes this thread the
  // one driving the backend, if the group is idle; release_inline ends it.
  bool claim_inline(uint64_t* sequence);
  // claim_p2p_now makes this thread the one driving the backend for a
  // blocking send or recv, if the group is idle and the backend can
  // (p2p_now); release_inline ends it too.
  bool claim_p2p_now();
  void release_inline();
  // point_to_point runs a blocking send or recv (`run`) at once on the
  // caller's thread when claim_p2p_now succeeds, or through enqueue
  // (`post`, for the worker) otherwise and always for isend and irecv.
  // Only in the first case no thread hands the call over and back: a
  // 2-rank ping-pong on one host takes a fraction of a microsecond.
  template <class Run, class Post>
  std::shared_ptr<Work> point_to_point(std::string_view description, const OpShape& shape,
                                       const P2POptions& o, Run run, Post post);
  void worker_loop();
  // run_task runs one operation on the thread driving the backend.
  void run_task(Work& work, const Task& task);
  void mark_broken(std::exception_ptr error, const std::string& what);
  // refusal is why the group refuses work (broken_, or an abort() since
  // the last operation), null when it does not. The driving thread only.
  std::exception_ptr refusal();
  // agree runs COHORT_DEBUG=detail's check of collective #n (desync_ set):
  // false, with *error set, when the ranks' calls differ.
  bool agree(const Fingerprint& mine, const OpContext& op, std::exception_ptr* error);
  void check_rank(int r, const char* what) const;

  // What a group holds (its backend, its worker, its queue, the gate that
  // numbers its operations, its diagnostics) lives in State
  // (src/process_group/process_group_state.h), out of this header: users
  // of the API see only the operations.
  struct State;
  std::unique_ptr<State> state_;

  // The gate's bits (State::gate_): who drives the backend, whether work
  // is queued, whether the group stops, and the last collective number.
  static constexpr uint64_t kDriving = 1, kQueued = 2, kStopping = 4;
  static constexpr int kSequenceShift = 3;
  static constexpr uint64_t kOneSequence = uint64_t{1} << kSequenceShift;
  // try_drive sets kDriving unless another thread drives (clearing
  // kQueued too when `last` is true: the caller pops the last queued
  // item); stop_driving clears it. Acquire and release: each driver sees
  // what the one before it did to the backend.
  bool try_drive(bool last);
  void stop_driving();
};

}  // namespace cohort
