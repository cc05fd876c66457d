// The MPI backend's side of COHORT_DEBUG=detail: fingerprints go point to
// point to every other rank on the group's second communicator, tagged by
// sequence number, and are polled against the deadline. Point to point and
// not MPI_Allgather so that, when some rank never sends its fingerprint, the
// others know which rank it is, and a timeout cancels instead of hanging in
// a collective MPI cannot cancel.
#include <thread>

#include "process_group/mpi/mpi_backend.h"
#include "process_group/mpi/mpi_runtime.h"

namespace cohort {

Status MpiBackend::exchange_fingerprints(const void* mine, size_t bytes, void* all, uint8_t* arrived,
                                         const OpContext& op) {
  const int tag = static_cast<int>(op.sequence % (static_cast<uint64_t>(tag_ub_) + 1));
  const int n = 2 * (size_ - 1);  // receives from the others, then sends to them
  fingerprint_requests_.assign(static_cast<size_t>(n), MPI_REQUEST_NULL);
  fingerprint_done_.resize(static_cast<size_t>(n));
  auto peer_of = [&](int i) {
    const int k = i % (size_ - 1);
    return k < rank_ ? k : k + 1;
  };
  {
    mpi::CallLock lock;
    for (int i = 0; i < n; ++i) {
      const int q = peer_of(i);
      const int rc = i < size_ - 1 ? MPI_Irecv(static_cast<uint8_t*>(all) + static_cast<size_t>(q) * bytes,
                                               static_cast<int>(bytes), MPI_BYTE, q, tag, fingerprint_comm_,
                                               &fingerprint_requests_[i])
                                   : MPI_Isend(mine, static_cast<int>(bytes), MPI_BYTE, q, tag,
                                               fingerprint_comm_, &fingerprint_requests_[i]);
      Status st = mpi::check(rc, i < size_ - 1 ? "MPI_Irecv" : "MPI_Isend", *op.what);
      if (!st.ok()) return st;  // the group is marked broken; what was posted stays with MPI
    }
  }
  int left = n;
  Status result;
  while (left > 0) {
    int count = 0, rc;
    {
      mpi::CallLock lock;
      rc = MPI_Testsome(n, fingerprint_requests_.data(), &count, fingerprint_done_.data(),
                        MPI_STATUSES_IGNORE);
    }
    if (rc != MPI_SUCCESS) {
      result = mpi::check(rc, "MPI_Testsome", *op.what);
      break;
    }
    if (count == MPI_UNDEFINED) break;  // every request is done
    for (int k = 0; k < count; ++k) {
      if (fingerprint_done_[k] < size_ - 1) arrived[peer_of(fingerprint_done_[k])] = 1;
    }
    left -= count;
    if (left == 0) break;
    if (aborted_.load(std::memory_order_acquire)) {
      result = aborted_status().with_context(*op.what);
      break;
    }
    if (op.deadline.expired()) {
      result = Status(StatusCode::kTimeout, *op.what + ": fingerprints of some ranks did not come in time");
      break;
    }
    // A debugging aid: a yield per poll, no tuned backoff.
    if (count == 0) std::this_thread::yield();
  }
  if (!result.ok()) {
    // Receives can be cancelled; sends MPI may still be working on stay.
    mpi::CallLock lock;
    for (int i = 0; i < n; ++i) {
      if (fingerprint_requests_[i] == MPI_REQUEST_NULL) continue;
      if (i < size_ - 1) {
        MPI_Cancel(&fingerprint_requests_[i]);
        MPI_Wait(&fingerprint_requests_[i], MPI_STATUS_IGNORE);
      } else {
        abandoned_.push_back(fingerprint_requests_[i]);
      }
    }
  }
  return result;
}

std::string MpiBackend::describe_links() const {
  return "links: MPI's own (its transports and collective algorithms)";
}

}  // namespace cohort
