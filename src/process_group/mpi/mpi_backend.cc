#include "process_group/mpi/mpi_backend.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

#include "common/config_registry.h"
#include "common/logging.h"
#include "process_group/backend_module.h"
#include "process_group/mpi/mpi_runtime.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

constexpr size_t kMaxCount = INT_MAX;

// How often the watchdog looks at the blocking call in flight: a timeout
// ends the job at most this much after its deadline.
constexpr std::chrono::milliseconds kWatchPeriod{100};

Status too_large(const std::string& what, size_t count) {
  return invalid_argument(what + ": " + std::to_string(count) +
                          " elements is more than the mpi backend can pass (MPI counts are int, at most " +
                          std::to_string(kMaxCount) + ")");
}

// layout_of lays `list` out as MPI's v-collectives want it (MpiLayout, in
// mpi_backend.h), into `l`, whose vectors keep their capacity from call to
// call: no allocation per collective once they are large enough.
Status layout_of(const std::vector<Buffer>& list, const std::string& what, MpiLayout* l) {
  l->clear();
  const size_t esize = list.empty() ? 1 : dtype_size(list[0].dtype);
  for (const Buffer& b : list) {
    l->counts.push_back(static_cast<int>(b.count));
    l->displs.push_back(static_cast<int>(l->total));
    if (b.count > 0) {
      uint8_t* at = static_cast<uint8_t*>(b.data);
      if (l->base == nullptr) l->base = at - l->total * esize;
      if (at != l->base + l->total * esize) l->contiguous = false;
    }
    l->total += b.count;
    if (l->total > kMaxCount) return too_large(what, l->total);
  }
  return Status::ok_status();
}

// pack copies the list into `into` back to back (as `l` lays it out).
uint8_t* pack(const std::vector<Buffer>& list, const MpiLayout& l, std::vector<uint8_t>& into) {
  const size_t esize = list.empty() ? 1 : dtype_size(list[0].dtype);
  into.resize(l.total * esize + 1);
  for (size_t q = 0; q < list.size(); ++q) {
    if (list[q].count) std::memcpy(into.data() + l.displs[q] * esize, list[q].data, list[q].bytes());
  }
  return into.data();
}

void unpack(const std::vector<Buffer>& list, const MpiLayout& l, const uint8_t* from) {
  const size_t esize = list.empty() ? 1 : dtype_size(list[0].dtype);
  for (size_t q = 0; q < list.size(); ++q) {
    if (list[q].count) std::memcpy(list[q].data, from + l.displs[q] * esize, list[q].bytes());
  }
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return a_bytes && b_bytes && x < y + b_bytes && y < x + a_bytes;
}

// mpi_tag maps cohort's tags (any int; monitored_barrier uses a negative
// one) to MPI's 0..tag_ub. Non-negative tags up to tag_ub (2^31-1 in Open
// MPI) map to themselves.
int mpi_tag(int tag, int tag_ub) {
  const int64_t span = static_cast<int64_t>(tag_ub) + 1;
  return static_cast<int>(((static_cast<int64_t>(tag) % span) + span) % span);
}

// Backoff: MPI only progresses inside MPI calls, so waiting means polling.
// Spin first (small collectives finish in microseconds), then yield the
// core (ranks may outnumber cores); `may_sleep` (an idle point-to-point
// wait, where latency matters less) ends in short sleeps.
void backoff(int* spins, bool may_sleep) {
  ++*spins;
  if (*spins < 1000) return;
  if (!may_sleep || *spins < 20000) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

Result<std::unique_ptr<MpiBackend>> MpiBackend::create(const std::vector<int>& world_ranks, int tag) {
  Status st = mpi::ensure_initialized();
  if (!st.ok()) return st;
  const std::string what = "creating the MPI communicator of group rank list";
  MPI_Comm comm = MPI_COMM_NULL, fingerprint_comm = MPI_COMM_NULL;
  bool whole = static_cast<int>(world_ranks.size()) == mpi::world_size();
  for (size_t i = 0; whole && i < world_ranks.size(); ++i) whole = world_ranks[i] == static_cast<int>(i);
  {
    mpi::CallLock lock;
    if (whole) {
      // A communicator of our own: cohort's messages never match the
      // program's own MPI traffic on MPI_COMM_WORLD.
      st = mpi::check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup", what);
    } else {
      // Only the members call MPI_Comm_create_group, as only the members
      // of a cohort group wait in new_group.
      MPI_Group world_group, group;
      MPI_Comm_group(MPI_COMM_WORLD, &world_group);
      MPI_Group_incl(world_group, static_cast<int>(world_ranks.size()), world_ranks.data(), &group);
      st =
          mpi::check(MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &comm), "MPI_Comm_create_group", what);
      MPI_Group_free(&group);
      MPI_Group_free(&world_group);
    }
    if (!st.ok()) return st;
    // Errors come back as codes, which become Status, instead of aborting.
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    st = mpi::check(MPI_Comm_dup(comm, &fingerprint_comm), "MPI_Comm_dup", what);
    if (!st.ok()) {
      MPI_Comm_free(&comm);
      return st;
    }
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  return std::unique_ptr<MpiBackend>(new MpiBackend(comm, fingerprint_comm, rank, size));
}

MpiBackend::MpiBackend(MPI_Comm comm, MPI_Comm fingerprint_comm, int rank, int size)
    : Backend("mpi"),
      comm_(comm),
      fingerprint_comm_(fingerprint_comm),
      rank_(rank),
      size_(size),
      tag_ub_(32767),
      caller_thread_(config_string(knobs::kMpiThread) == "caller"),
      poll_(config_string(knobs::kMpiWait) == "poll") {
  if (!poll_) watchdog_ = std::thread([this] { watchdog_loop(); });
  COHORT_LOG(kDebug) << "mpi backend: rank " << rank_ << " of " << size_ << ", MPI calls on "
                     << (caller_thread_ ? "the caller's thread when idle" : "the group's worker") << ", "
                     << (poll_ ? "non-blocking collectives polled" : "blocking collectives, watchdog");
  int* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
  if (found && ub) tag_ub_ = *ub;
}

MpiBackend::~MpiBackend() {
  if (watchdog_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(watch_mu_);
      stop_watchdog_ = true;
    }
    watch_cv_.notify_one();
    watchdog_.join();
  }
  fail_all_pending(Status(StatusCode::kBackendError, "the group was destroyed"));
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    mpi::CallLock lock;
    MPI_Comm_free(&fingerprint_comm_);
    MPI_Comm_free(&comm_);
  }
}

Status MpiBackend::aborted_status() const {
  std::lock_guard<std::mutex> lock(abort_mu_);
  return abort_reason_;
}

void MpiBackend::abort(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (abort_reason_.ok()) abort_reason_ = reason;
  }
  aborted_.store(true, std::memory_order_release);
  wake();
}

Status MpiBackend::finish(int rc, MPI_Request request, const char* call, const OpContext& op) {
  Status st = mpi::check(rc, call, *op.what);
  if (!st.ok()) return st;
  int spins = 0;
  for (;;) {
    int flag = 0;
    {
      mpi::CallLock lock;
      rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) return mpi::check(rc, "MPI_Test", *op.what);
    if (flag) return Status::ok_status();
    if (aborted_.load(std::memory_order_acquire)) {
      abandoned_.push_back(request);
      return aborted_status().with_context(*op.what);
    }
    if (op.deadline.expired()) {
      // MPI cannot cancel a collective: leave it to MPI and fail the group.
      abandoned_.push_back(request);
      return Status(StatusCode::kTimeout,
                    *op.what + ": " + call + " (non-blocking)" +
                        " did not complete before the timeout (some rank did not join it?); MPI cannot "
                        "cancel it, so MPI may still use its buffers");
    }
    backoff(&spins, false);
  }
}

template <class Polled, class... A, class... B>
Status MpiBackend::collective(const char* call, const OpContext& op, int (*blocking)(A...), Polled polled,
                              B&&... args) {
  if (poll_) {
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    {
      mpi::CallLock lock;
      rc = polled(std::forward<B>(args)..., &req);
    }
    return finish(rc, req, call, op);
  }
  {
    // The watchdog is not woken: it looks every kWatchPeriod, so that a
    // small collective costs no thread wake-up.
    std::lock_guard<std::mutex> lock(watch_mu_);
    watched_ = &op;
    watched_call_ = call;
  }
  int rc;
  {
    mpi::CallLock lock;
    rc = blocking(std::forward<B>(args)...);
  }
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watched_ = nullptr;
  }
  return mpi::check(rc, call, *op.what);
}

void MpiBackend::watchdog_loop() {
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!stop_watchdog_) {
    if (watched_ == nullptr || !watched_->deadline.expired()) {
      watch_cv_.wait_for(lock, kWatchPeriod);
      continue;
    }
    // A blocking MPI call cannot be cancelled and the worker is inside it:
    // the only way not to hang forever is to end the job, as torch's NCCL
    // watchdog does. COHORT_MPI_WAIT=poll gives a TimeoutError instead.
    COHORT_LOG(kError)
        << *watched_->what << ": " << watched_call_
        << " did not complete within its timeout (some rank did not join it?); a blocking MPI "
           "call cannot be cancelled, so the mpi backend's watchdog ends the job with MPI_Abort "
           "(COHORT_MPI_WAIT=poll raises TimeoutError instead)";
    MPI_Abort(comm_, 1);
    return;
  }
}

Status MpiBackend::broadcast(const Buffer& buffer, int root, const OpContext& op) {
  if (buffer.count > kMaxCount) return too_large(*op.what, buffer.count);
  return collective("MPI_Bcast", op, MPI_Bcast, MPI_Ibcast, buffer.data, static_cast<int>(buffer.count),
                    mpi::datatype(buffer.dtype), root, comm_);
}

Status MpiBackend::all_reduce(const Buffer& buffer, ReduceOp reduce_op, const OpContext& op) {
  auto mpi_op = mpi::reduce_operation(buffer.dtype, reduce_op.kind);
  if (!mpi_op.ok()) return mpi_op.status();
  if (buffer.count > kMaxCount) return too_large(*op.what, buffer.count);
  // PREMUL_SUM scales each rank's input, then sums; AVG sums, then divides.
  if (reduce_op.kind == ReduceOp::PREMUL_SUM)
    scale(buffer.dtype, buffer.data, buffer.count, reduce_op.factor);
  Status st = collective("MPI_Allreduce", op, MPI_Allreduce, MPI_Iallreduce, MPI_IN_PLACE, buffer.data,
                         static_cast<int>(buffer.count), mpi::datatype(buffer.dtype), mpi_op.value(), comm_);
  if (st.ok() && reduce_op.kind == ReduceOp::AVG) scale(buffer.dtype, buffer.data, buffer.count, 1.0 / size_);
  return st;
}

Status MpiBackend::reduce(const Buffer& buffer, int root, ReduceOp reduce_op, const OpContext& op) {
  auto mpi_op = mpi::reduce_operation(buffer.dtype, reduce_op.kind);
  if (!mpi_op.ok()) return mpi_op.status();
  if (buffer.count > kMaxCount) return too_large(*op.what, buffer.count);
  void* input = buffer.data;
  if (reduce_op.kind == ReduceOp::PREMUL_SUM) {
    if (rank_ != root) {  // leave the caller's input as it was
      staging_.resize(buffer.bytes() + 1);
      if (buffer.bytes()) std::memcpy(staging_.data(), buffer.data, buffer.bytes());
      input = staging_.data();
    }
    scale(buffer.dtype, input, buffer.count, reduce_op.factor);
  }
  Status st = collective("MPI_Reduce", op, MPI_Reduce, MPI_Ireduce, rank_ == root ? MPI_IN_PLACE : input,
                         rank_ == root ? buffer.data : nullptr, static_cast<int>(buffer.count),
                         mpi::datatype(buffer.dtype), mpi_op.value(), root, comm_);
  if (st.ok() && reduce_op.kind == ReduceOp::AVG && rank_ == root) {
    scale(buffer.dtype, buffer.data, buffer.count, 1.0 / size_);
  }
  return st;
}

Status MpiBackend::all_gather(const std::vector<Buffer>& outputs, const Buffer& input, const OpContext& op) {
  Status laid = layout_of(outputs, *op.what, &out_layout_);
  if (!laid.ok()) return laid;
  const MpiLayout& l = out_layout_;
  const MPI_Datatype type = mpi::datatype(input.dtype);
  uint8_t* recv = l.base;
  if (!l.contiguous) {
    scratch_.resize(l.total * dtype_size(input.dtype) + 1);
    recv = scratch_.data();
  }
  // MPI forbids the input aliasing the output, except as MPI_IN_PLACE.
  const bool in_place = l.contiguous && input.count && input.data == outputs[rank_].data;
  // Equal blocks back to back take MPI_Allgather, whose algorithms Open
  // MPI tunes more than MPI_Allgatherv's.
  const bool even =
      l.contiguous && std::all_of(l.counts.begin(), l.counts.end(), [&](int c) { return c == l.counts[0]; });
  const void* send = in_place ? MPI_IN_PLACE : input.data;
  const int count = static_cast<int>(input.count);
  Status st = even ? collective("MPI_Allgather", op, MPI_Allgather, MPI_Iallgather, send, count, type, recv,
                                count, type, comm_)
                   : collective("MPI_Allgatherv", op, MPI_Allgatherv, MPI_Iallgatherv, send, count, type,
                                recv, l.counts.data(), l.displs.data(), type, comm_);
  if (st.ok() && !l.contiguous) unpack(outputs, l, recv);
  return st;
}

Status MpiBackend::gather(const std::vector<Buffer>& outputs, const Buffer& input, int root,
                          const OpContext& op) {
  if (input.count > kMaxCount) return too_large(*op.what, input.count);
  const MPI_Datatype type = mpi::datatype(input.dtype);
  MpiLayout& l = out_layout_;
  l.clear();  // only the root's counts matter
  uint8_t* recv = nullptr;
  bool in_place = false;
  if (rank_ == root) {
    Status laid = layout_of(outputs, *op.what, &l);
    if (!laid.ok()) return laid;
    if (l.contiguous) {
      recv = l.base;
      in_place = input.count && input.data == outputs[rank_].data;
    } else {
      scratch_.resize(l.total * dtype_size(input.dtype) + 1);
      recv = scratch_.data();
    }
  }
  Status st = collective("MPI_Gatherv", op, MPI_Gatherv, MPI_Igatherv, in_place ? MPI_IN_PLACE : input.data,
                         static_cast<int>(input.count), type, recv, l.counts.data(), l.displs.data(), type,
                         root, comm_);
  if (st.ok() && rank_ == root && !l.contiguous) unpack(outputs, l, recv);
  return st;
}

Status MpiBackend::scatter(const Buffer& output, const std::vector<Buffer>& inputs, int root,
                           const OpContext& op) {
  if (output.count > kMaxCount) return too_large(*op.what, output.count);
  const MPI_Datatype type = mpi::datatype(output.dtype);
  MpiLayout& l = in_layout_;
  l.clear();  // only the root's counts matter
  uint8_t* send = nullptr;
  bool in_place = false;
  if (rank_ == root) {
    Status laid = layout_of(inputs, *op.what, &l);
    if (!laid.ok()) return laid;
    send = l.contiguous ? l.base : pack(inputs, l, staging_);
    in_place = l.contiguous && output.count && output.data == inputs[rank_].data;
  }
  return collective("MPI_Scatterv", op, MPI_Scatterv, MPI_Iscatterv, send, l.counts.data(), l.displs.data(),
                    type, in_place ? MPI_IN_PLACE : output.data, static_cast<int>(output.count), type, root,
                    comm_);
}

Status MpiBackend::reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs, ReduceOp reduce_op,
                                  const OpContext& op) {
  auto mpi_op = mpi::reduce_operation(output.dtype, reduce_op.kind);
  if (!mpi_op.ok()) return mpi_op.status();
  Status laid = layout_of(inputs, *op.what, &in_layout_);
  if (!laid.ok()) return laid;
  const MpiLayout& l = in_layout_;
  const size_t esize = dtype_size(output.dtype);
  uint8_t* send = l.base;
  // MPI_Reduce_scatter wants the inputs back to back and the output apart
  // from them (its MPI_IN_PLACE means something else); PREMUL_SUM must not
  // scale the caller's inputs. Otherwise, copy.
  if (!l.contiguous || reduce_op.kind == ReduceOp::PREMUL_SUM) {
    send = pack(inputs, l, staging_);
    if (reduce_op.kind == ReduceOp::PREMUL_SUM) scale(output.dtype, send, l.total, reduce_op.factor);
  }
  const bool apart = !overlaps(send, l.total * esize, output.data, output.bytes());
  uint8_t* recv = static_cast<uint8_t*>(output.data);
  if (!apart) {
    scratch_.resize(output.bytes() + 1);
    recv = scratch_.data();
  }
  Status st = collective("MPI_Reduce_scatter", op, MPI_Reduce_scatter, MPI_Ireduce_scatter, send, recv,
                         l.counts.data(), mpi::datatype(output.dtype), mpi_op.value(), comm_);
  if (!st.ok()) return st;
  if (!apart && output.count) std::memcpy(output.data, recv, output.bytes());
  if (reduce_op.kind == ReduceOp::AVG) scale(output.dtype, output.data, output.count, 1.0 / size_);
  return st;
}

Status MpiBackend::all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                              const OpContext& op) {
  Status laid = layout_of(inputs, *op.what, &in_layout_);
  if (laid.ok()) laid = layout_of(outputs, *op.what, &out_layout_);
  if (!laid.ok()) return laid;
  const MpiLayout& in = in_layout_;
  const MpiLayout& out = out_layout_;
  const MPI_Datatype type = mpi::datatype(inputs[0].dtype);
  const size_t esize = dtype_size(inputs[0].dtype);
  uint8_t* recv = out.base;
  if (!out.contiguous) {
    scratch_.resize(out.total * esize + 1);
    recv = scratch_.data();
  }
  uint8_t* send = in.base;
  if (!in.contiguous || overlaps(send, in.total * esize, recv, out.total * esize))
    send = pack(inputs, in, staging_);
  Status st = collective("MPI_Alltoallv", op, MPI_Alltoallv, MPI_Ialltoallv, send, in.counts.data(),
                         in.displs.data(), type, recv, out.counts.data(), out.displs.data(), type, comm_);
  if (st.ok() && !out.contiguous) unpack(outputs, out, recv);
  return st;
}

Status MpiBackend::barrier(const OpContext& op) {
  return collective("MPI_Barrier", op, MPI_Barrier, MPI_Ibarrier, comm_);
}

void MpiBackend::post_send(const Buffer& buffer, int dst, int tag, const OpContext& op, Completion done) {
  post(false, buffer, dst, tag, op, std::move(done));
}

void MpiBackend::post_recv(const Buffer& buffer, int src, int tag, const OpContext& op, Completion done) {
  post(true, buffer, src < 0 ? MPI_ANY_SOURCE : src, tag, op, std::move(done));
}

void MpiBackend::post(bool is_recv, const Buffer& buffer, int peer, int tag, const OpContext& op,
                      Completion done) {
  if (aborted_.load(std::memory_order_acquire)) return done(aborted_status().with_context(*op.what), -1);
  if (buffer.bytes() > kMaxCount) return done(too_large(*op.what, buffer.bytes()), -1);
  MPI_Request req;
  int rc;
  {
    mpi::CallLock lock;
    const int bytes = static_cast<int>(buffer.bytes());
    rc = is_recv ? MPI_Irecv(buffer.data, bytes, MPI_BYTE, peer, mpi_tag(tag, tag_ub_), comm_, &req)
                 : MPI_Isend(buffer.data, bytes, MPI_BYTE, peer, mpi_tag(tag, tag_ub_), comm_, &req);
  }
  Status st = mpi::check(rc, is_recv ? "MPI_Irecv" : "MPI_Isend", *op.what);
  if (!st.ok()) return done(st, -1);
  requests_.push_back(req);
  pending_.push_back(Pending{std::move(done), op.deadline, *op.what, is_recv});
}

void MpiBackend::complete_pending(size_t i, const Status& st, int source) {
  Completion done = std::move(pending_[i].done);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  requests_.erase(requests_.begin() + static_cast<std::ptrdiff_t>(i));
  done(st, source);
}

void MpiBackend::fail_all_pending(const Status& st) {
  while (!pending_.empty()) {
    const size_t i = pending_.size() - 1;
    {
      mpi::CallLock lock;
      int flag = 0;
      if (pending_[i].is_recv) {
        // A receive can always be cancelled (or has completed meanwhile).
        MPI_Cancel(&requests_[i]);
        MPI_Wait(&requests_[i], MPI_STATUS_IGNORE);
      } else if (MPI_Test(&requests_[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) {
        abandoned_.push_back(requests_[i]);
      }
    }
    complete_pending(i, st.with_context(pending_[i].what), -1);
  }
}

void MpiBackend::progress(Deadline until) {
  int spins = 0;
  while (!pending_.empty()) {
    if (aborted_.load(std::memory_order_acquire)) return fail_all_pending(aborted_status());
    const int n = static_cast<int>(requests_.size());
    done_index_.resize(static_cast<size_t>(n));
    done_status_.resize(static_cast<size_t>(n));
    int outcount = 0, rc;
    {
      mpi::CallLock lock;
      rc = MPI_Testsome(n, requests_.data(), &outcount, done_index_.data(), done_status_.data());
    }
    if (outcount > 0 && outcount != MPI_UNDEFINED) {
      // Complete from the highest index down, so that erasing keeps the
      // other indices valid.
      std::vector<std::pair<int, MPI_Status>> finished;
      for (int k = 0; k < outcount; ++k) finished.emplace_back(done_index_[k], done_status_[k]);
      std::sort(finished.begin(), finished.end(),
                [](const auto& a, const auto& b) { return a.first > b.first; });
      for (auto& [i, status] : finished) {
        const int err = rc == MPI_ERR_IN_STATUS ? status.MPI_ERROR : MPI_SUCCESS;
        Status st = mpi::check(err, pending_[i].is_recv ? "MPI_Irecv" : "MPI_Isend", pending_[i].what);
        complete_pending(static_cast<size_t>(i), st, pending_[i].is_recv && st.ok() ? status.MPI_SOURCE : -1);
      }
      spins = 0;
      continue;
    }
    if (rc != MPI_SUCCESS) return fail_all_pending(mpi::check(rc, "MPI_Testsome", "point-to-point progress"));
    for (size_t i = pending_.size(); i-- > 0;) {
      if (!pending_[i].deadline.expired()) continue;
      {
        mpi::CallLock lock;
        if (pending_[i].is_recv) {
          MPI_Cancel(&requests_[i]);
          MPI_Wait(&requests_[i], MPI_STATUS_IGNORE);
        } else {
          abandoned_.push_back(requests_[i]);  // a send cannot be taken back
        }
      }
      complete_pending(
          i, Status(StatusCode::kTimeout, pending_[i].what + ": Timed out (the peer never matched it)"), -1);
    }
    if (woken_.exchange(false, std::memory_order_acq_rel) || until.expired()) return;
    backoff(&spins, true);
  }
}

// The module's entry (backend_module.h): libcohort loads this file's
// library the first time a group asks for MPI.
namespace {

Status world_of_this_process(int* rank, int* size) {
  Status st = mpi::ensure_initialized();
  if (!st.ok()) return st;
  *rank = mpi::world_rank();
  *size = mpi::world_size();
  return st;
}

Result<std::unique_ptr<Backend>> make_backend(const std::vector<int>& world_ranks, int tag) {
  auto backend = MpiBackend::create(world_ranks, tag);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(std::move(backend.value()));
}

}  // namespace
}  // namespace cohort

extern "C" const cohort::BackendModule* cohort_mpi_module() {
  static const cohort::BackendModule table = [] {
    cohort::BackendModule t;
    t.mpi_world = cohort::world_of_this_process;
    t.make_mpi_backend = cohort::make_backend;
    return t;
  }();
  return &table;
}
