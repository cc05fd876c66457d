// group_trace.h: what the debugging tools know of one group: who it is, its
// flight recorder and its store; and the calls ProcessGroup makes as an
// operation ends.
//
// A ProcessGroup owns its GroupTrace (shared with the process's monitor,
// diagnostics/group_monitor.h, which may hold it a moment longer), so
// that dumps and the stall inspector never touch the group itself.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "diagnostics/arrival_accounting.h"
#include "diagnostics/flight_recorder.h"
#include "diagnostics/trace_dump.h"

namespace cohort {

class Store;

class GroupTrace {
 public:
  // `store` may be null (MPI alone); the ring keeps `capacity` entries.
  GroupTrace(std::string name, int rank, std::vector<int> global_ranks, std::string backend,
             std::shared_ptr<Store> store, size_t capacity);

  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(global_ranks_.size()); }
  int global_rank() const { return global_ranks_[static_cast<size_t>(rank_)]; }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  const std::shared_ptr<Store>& store() const { return store_; }
  FlightRecorder& recorder() { return recorder_; }
  const FlightRecorder& recorder() const { return recorder_; }
  // The straggler accounting: ticked by the monitor thread, reported by
  // anyone.
  ArrivalAccounting& arrivals() { return arrivals_; }
  const ArrivalAccounting& arrivals() const { return arrivals_; }

  // finish records how an operation ended (`error` null: it completed), on
  // the thread that drove it. The group's first failure that is a timeout,
  // a NetworkError or a DesyncError also writes this rank's dump (when
  // COHORT_TRACE_DIR is set), before the caller can see the error and exit.
  void finish(const TraceTicket& ticket, const std::exception_ptr& error) {
    if (!error) return recorder_.finished(ticket, nullptr);
    finish_failed(ticket, error);
  }

  // dump returns the group as this rank sees it now.
  GroupDump dump(int64_t unix_offset) const;

 private:
  void finish_failed(const TraceTicket& ticket, const std::exception_ptr& error);

  const std::string name_;
  const int rank_;
  const std::vector<int> global_ranks_;
  const std::string backend_;
  const std::shared_ptr<Store> store_;
  FlightRecorder recorder_;
  ArrivalAccounting arrivals_;
  std::atomic<bool> dumped_on_failure_{false};
};

// trace_buffer_entries is COHORT_TRACE_BUFFER_ENTRIES, checked.
size_t trace_buffer_entries();

}  // namespace cohort
