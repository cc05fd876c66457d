// group_monitor.h: the one thread per process that watches every group:
// it runs the stall inspector (stall_inspector.h) and writes the
// flight-recorder dumps asked for by SIGUSR1 (docs/flight_recorder.md).
//
// Groups join the monitor through a MonitorLease. The first lease starts
// the monitor's thread (when COHORT_STALL_WARN_S > 0 or COHORT_TRACE_DIR
// is set); the last one to go stops and joins it, so no thread of ours
// outlives the groups, and the leases never depend on the order in which
// statics are destroyed at exit. With COHORT_TRACE_DIR set the first lease
// also installs a SIGUSR1 handler (if SIGUSR1 has none yet) that only
// writes to an eventfd the thread waits on: the dump itself is written on
// the thread, never in the handler.
#pragma once

#include <memory>
#include <string>

namespace cohort {

class GroupTrace;
class GroupMonitor;

// MonitorLease keeps one group watched while it lives. Throws
// InvalidArgument for a bad COHORT_STALL_WARN_S.
class MonitorLease {
 public:
  explicit MonitorLease(std::shared_ptr<GroupTrace> group);
  ~MonitorLease();
  MonitorLease(const MonitorLease&) = delete;
  MonitorLease& operator=(const MonitorLease&) = delete;

 private:
  std::shared_ptr<GroupMonitor> monitor_;
  const GroupTrace* group_;
};

// dump_traces writes this process's dump (every watched group) to
// COHORT_TRACE_DIR now, one file per global rank; nothing when that is
// unset. `reason` is recorded in the dump. Any thread; never throws (a
// dump that cannot be written is logged).
void dump_traces(const std::string& reason);

}  // namespace cohort
