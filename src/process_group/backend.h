// backend.h: what a backend (native, MPI, NCCL) implements for a group.
//
// The ProcessGroup validates arguments, numbers operations and runs them on
// its worker thread; a Backend only executes them. Collectives run to
// completion and return their Status. Point-to-point operations are posted
// and complete later through their Completion, while the worker calls
// progress() between operations. A method a backend does not override says
// "backend X does not support Y".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cohort/store.h"
#include "cohort/symmetric_memory.h"
#include "cohort/types.h"
#include "common/deadline.h"
#include "common/status.h"
#include "diagnostics/flight_recorder.h"
#include "transport/transport.h"

namespace cohort {

// OpContext is one operation's identity: its sequence number, deadline and
// a description for errors ("all_reduce #5 of group default").
struct OpContext {
  uint64_t sequence;
  Deadline deadline;
  const std::string* what;  // the Work's description, kept alive by `description`
  std::shared_ptr<const void> description;
  TraceTicket trace = {};  // its flight-recorder entry (queued operations)
  // all_to_all only: the call split its buffers evenly (all_to_all_single
  // without split sizes), so by torch's contract every rank's blocks have
  // one size, the same on every rank, and the ranks need not agree on it.
  bool even_blocks = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  const std::string& name() const { return name_; }

  virtual Status broadcast(const Buffer& buffer, int root, const OpContext& op);
  virtual Status all_reduce(const Buffer& buffer, ReduceOp reduce_op, const OpContext& op);
  // all_reduce_coalesced reduces several CPU buffers of one dtype as if they
  // were one, each in place. This default packs them into one buffer, runs
  // all_reduce and unpacks; a backend that can read them where they are
  // (native, shared memory) overrides it.
  virtual Status all_reduce_coalesced(const std::vector<Buffer>& buffers, ReduceOp reduce_op,
                                      const OpContext& op);
  virtual Status reduce(const Buffer& buffer, int root, ReduceOp reduce_op, const OpContext& op);
  virtual Status all_gather(const std::vector<Buffer>& outputs, const Buffer& input, const OpContext& op);
  virtual Status gather(const std::vector<Buffer>& outputs, const Buffer& input, int root,
                        const OpContext& op);
  virtual Status scatter(const Buffer& output, const std::vector<Buffer>& inputs, int root,
                         const OpContext& op);
  virtual Status reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs, ReduceOp reduce_op,
                                const OpContext& op);
  virtual Status all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                            const OpContext& op);
  virtual Status barrier(const OpContext& op);

  virtual void post_send(const Buffer& buffer, int dst, int tag, const OpContext& op, Completion done);
  virtual void post_recv(const Buffer& buffer, int src, int tag, const OpContext& op, Completion done);
  // send_now and recv_now run a blocking point-to-point call on the
  // caller's thread, which drives the backend while the group is idle:
  // they post it, drive until it completed (requests already in flight
  // move meanwhile) and return its Status; recv_now sets *source. Only a
  // backend whose p2p_now() is true has them; the others' calls go
  // through the worker (post_send, post_recv and progress).
  virtual bool p2p_now() const { return false; }
  virtual Status send_now(const Buffer& buffer, int dst, int tag, const OpContext& op);
  virtual Status recv_now(const Buffer& buffer, int src, int tag, const OpContext& op, int* source);
  virtual bool has_pending() { return false; }
  virtual void progress(Deadline until) { (void)until; }
  virtual void wake() {}
  virtual void abort(const Status& reason) { (void)reason; }

  // lost_peers lists the group ranks whose connection ended while this one
  // was healthy (Transport::lost_peers), and same-host ranks whose process
  // is gone; shrink_group's suspects.
  virtual std::vector<int> lost_peers() const { return {}; }
  // can_shrink says whether shrink_group can rebuild this backend's group
  // without the lost ranks (MPI cannot without ULFM).
  virtual bool can_shrink() const { return false; }
  // may_run_inline says whether a blocking collective may run on the
  // caller's thread when the group is idle. A backend whose library wants
  // every call on one thread (MPI) says no: then everything runs on the
  // group's worker.
  virtual bool may_run_inline() const { return true; }
  // supports_device says whether buffers on devices of `type` can be given
  // to this backend (ProcessGroup refuses others on the caller's thread).
  virtual bool supports_device(DeviceType type) const { return type == DeviceType::kCPU; }

  // COHORT_DEBUG=detail. has_fingerprint_exchange says whether
  // exchange_fingerprints works here; where it does not (NCCL), the
  // group's store carries the fingerprints instead.
  virtual bool has_fingerprint_exchange() const { return false; }
  // exchange_fingerprints gives every other rank the `bytes` at `mine` and
  // receives theirs into `all` (rank q's at q * bytes), in messages apart
  // from every collective's and point-to-point's, so that it can never take
  // nor be taken for one of theirs, even when the ranks are out of step.
  // Sets arrived[q] to 1 for each rank whose bytes came, also when it fails
  // (kTimeout at op.deadline: the others then never called collective #n).
  virtual Status exchange_fingerprints(const void* mine, size_t bytes, void* all, uint8_t* arrived,
                                       const OpContext& op);
  // alloc_symmetric gives this rank its block of the group's collective
  // allocation number `id` (symmetric_memory.h); every rank calls it with
  // the same id and size. This default gives ordinary page-aligned memory;
  // the native backend maps one segment per host among the ranks there,
  // agreed through `store` (the group's; may be null).
  virtual Result<std::shared_ptr<SymmetricMemory>> alloc_symmetric(Store* store, uint64_t id, size_t bytes,
                                                                   Deadline deadline);
  // describe_links says, for COHORT_DEBUG=info, how this rank reaches the
  // others ("shared memory with ranks [1, 2]; TCP with ranks [3]").
  virtual std::string describe_links() const { return ""; }

 protected:
  // Only a concrete backend (native, MPI, NCCL, dispatch) is made.
  explicit Backend(std::string name) : name_(std::move(name)) {}
  Status unsupported(const char* op) const {
    return Status(StatusCode::kBackendError, "backend " + name_ + " does not support " + op);
  }

 private:
  std::string name_;
  std::vector<uint8_t> coalesce_scratch_;  // all_reduce_coalesced's packed buffer, reused
};

}  // namespace cohort
