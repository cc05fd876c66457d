// mpi_backend.h: the MPI backend: every collective and point-to-point call
// of a group maps to an MPI call on the group's own communicator.
//
// Threading: as with the native backend, a blocking collective that finds
// its group idle runs on the caller's thread (may_run_inline()), anything
// async or queued on the group's worker, never two calls of one group at
// once; with only MPI_THREAD_SERIALIZED, mpi::CallLock also serialises the
// threads of different groups. COHORT_MPI_THREAD=worker sends every call to
// the worker, as torch's ProcessGroupMPI does, at ~5 us per blocking call.
//
// Waiting and timeouts (COHORT_MPI_WAIT): MPI cannot cancel a collective.
// With `block` (the default) collectives are MPI's blocking calls (its
// fastest algorithms); a watchdog thread ends the job with MPI_Abort, after
// logging the operation, if one outlives its deadline. With `poll` they are
// MPI's non-blocking forms (MPI_Iallreduce, ...) polled against the
// deadline: on timeout the request is abandoned (MPI may still write its
// buffers), the Work fails with TimeoutError and the group is marked
// broken. Point-to-point calls always poll: a timed-out receive is
// cancelled, a send abandoned.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "process_group/backend.h"

namespace cohort {

// MpiLayout is a list of buffers as MPI's v-collectives want it: one base
// address, counts and displacements in elements. `contiguous` is false when
// the buffers do not lie back to back in order; then the backend copies
// through a scratch buffer laid out like that.
struct MpiLayout {
  std::vector<int> counts;
  std::vector<int> displs;
  size_t total = 0;
  uint8_t* base = nullptr;
  bool contiguous = true;
  // clear empties it and keeps the vectors' capacity.
  void clear() {
    counts.clear();
    displs.clear();
    total = 0;
    base = nullptr;
    contiguous = true;
  }
};

class MpiBackend : public Backend {
 public:
  // create makes the backend of the group of MPI_COMM_WORLD ranks
  // `world_ranks`, in that order (a dup of MPI_COMM_WORLD when it is the
  // whole world in order). Only members call it; `tag` tells apart groups
  // made concurrently (MPI_Comm_create_group).
  static Result<std::unique_ptr<MpiBackend>> create(const std::vector<int>& world_ranks, int tag);
  ~MpiBackend() override;

  int rank() const { return rank_; }
  int size() const { return size_; }

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

  void post_send(const Buffer& buffer, int dst, int tag, const OpContext& op, Completion done) override;
  void post_recv(const Buffer& buffer, int src, int tag, const OpContext& op, Completion done) override;
  bool has_pending() override { return !pending_.empty(); }
  void progress(Deadline until) override;
  void wake() override { woken_.store(true, std::memory_order_release); }
  void abort(const Status& reason) override;
  bool may_run_inline() const override { return caller_thread_; }
  // Fingerprints go point to point on a communicator of their own
  // (mpi_fingerprint.cc), apart from the group's collectives and messages.
  bool has_fingerprint_exchange() const override { return true; }
  Status exchange_fingerprints(const void* mine, size_t bytes, void* all, uint8_t* arrived,
                               const OpContext& op) override;
  std::string describe_links() const override;

 private:
  // A point-to-point request in flight (worker thread only).
  struct Pending {
    Completion done;
    Deadline deadline;
    std::string what;
    bool is_recv;
  };

  MpiBackend(MPI_Comm comm, MPI_Comm fingerprint_comm, int rank, int size);
  // post starts an MPI_Isend/MPI_Irecv of the buffer's bytes; `done` runs
  // from progress() (worker thread).
  void post(bool is_recv, const Buffer& buffer, int peer, int tag, const OpContext& op, Completion done);
  // finish waits for a started collective against the deadline (and
  // abort); `rc` is what starting it returned.
  Status finish(int rc, MPI_Request request, const char* call, const OpContext& op);
  Status aborted_status() const;
  // collective runs `blocking(args...)`, or with COHORT_MPI_WAIT=poll
  // `polled(args..., &request)` and waits for it; `call` names it.
  template <class Polled, class... A, class... B>
  Status collective(const char* call, const OpContext& op, int (*blocking)(A...), Polled polled, B&&... args);
  // watchdog_loop ends the job when a blocking call outlives its deadline.
  void watchdog_loop();
  // complete_pending completes request i with `st` and forgets it.
  void complete_pending(size_t i, const Status& st, int source);
  // fail_all_pending completes every request in flight with `st`
  // (receives are cancelled; sends cannot be, and are abandoned).
  void fail_all_pending(const Status& st);

  MPI_Comm comm_;
  // A duplicate of comm_ for COHORT_DEBUG=detail's fingerprints, made with
  // every group (whatever COHORT_DEBUG says here, so that ranks that differ
  // in it still make the same communicators).
  MPI_Comm fingerprint_comm_;
  int rank_;
  int size_;
  int tag_ub_;
  bool caller_thread_;    // COHORT_MPI_THREAD=caller (default), read once at creation
  bool poll_;             // COHORT_MPI_WAIT=poll, read once at creation
  std::thread watchdog_;  // with COHORT_MPI_WAIT=block only
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  const OpContext* watched_ = nullptr;  // the blocking call in flight (guarded by watch_mu_)
  const char* watched_call_ = "";
  bool stop_watchdog_ = false;
  MpiLayout in_layout_, out_layout_;   // reused by every operation, as the buffers below
  std::vector<uint8_t> scratch_;       // reused by every operation (worker thread only)
  std::vector<uint8_t> staging_;       // a second one, for copies of inputs
  std::vector<MPI_Request> requests_;  // point-to-point, parallel to pending_
  std::vector<Pending> pending_;
  std::vector<int> done_index_;
  std::vector<MPI_Status> done_status_;
  // Requests MPI cannot cancel, left behind by a timeout or an abort: they
  // are never freed (MPI may still use their buffers).
  std::vector<MPI_Request> abandoned_;
  std::vector<MPI_Request> fingerprint_requests_;  // receives first, then sends
  std::vector<int> fingerprint_done_;
  std::atomic<bool> woken_{false};
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mu_;
  Status abort_reason_;  // guarded by abort_mu_
};

}  // namespace cohort
