// process_group_state.h: what a ProcessGroup holds, out of its public
// header (cohort/process_group.h): the backend, the worker thread and its
// queue, the gate that numbers operations and says who drives the backend,
// why the group refuses work, and its diagnostics. Only the group's own
// files (process_group*.cc) include it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cohort/process_group.h"
#include "diagnostics/group_monitor.h"
#include "diagnostics/group_trace.h"
#include "process_group/backend.h"
#include "process_group/desync_check.h"

namespace cohort {

struct ProcessGroup::State {
  using Task = std::function<void()>;

  State(std::unique_ptr<Backend> backend, int rank, std::vector<int> global_ranks, std::string name,
        std::chrono::milliseconds timeout, std::shared_ptr<Store> store)
      : backend_(std::move(backend)),
        rank_(rank),
        global_ranks_(std::move(global_ranks)),
        name_(std::move(name)),
        timeout_(timeout),
        store_(std::move(store)) {}

  std::unique_ptr<Backend> backend_;  // null on a non-member
  const int rank_;
  const std::vector<int> global_ranks_;
  const std::string name_;
  const std::chrono::milliseconds timeout_;
  const std::shared_ptr<Store> store_;
  std::atomic<uint64_t> p2p_sequence_{0};           // sends and receives
  std::atomic<uint64_t> symmetric_allocations_{0};  // numbers alloc_symmetric's calls

  // gate_ holds who may drive the backend and the collectives' numbering
  // in one word, so that a blocking collective on an idle group claims the
  // backend and its number with one compare-and-swap (no lock):
  //  - kDriving: one thread (the worker, or a caller running its blocking
  //    collective itself) drives the backend; set and cleared by it;
  //  - kQueued: queue_ is not empty; changed under mu_ only;
  //  - kStopping: the group is being destroyed; set under mu_;
  //  - the bits from kSequenceShift up: the last collective number given
  //    out. Numbering and queueing happen in one atomic step, so numbers
  //    follow the order in which operations run.
  std::atomic<uint64_t> gate_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<Work>, Task>> queue_;  // guarded by mu_
  // Why the group refuses work; touched only by the thread driving.
  std::exception_ptr broken_;
  // abort()'s error, from any thread, for refusal() to take in.
  std::atomic<bool> aborted_{false};
  std::mutex abort_mu_;
  std::exception_ptr abort_error_;  // guarded by abort_mu_
  // What a blocking collective run on the caller's thread returns: one
  // Work, complete and successful, shared by all groups and held without
  // a reference count (process_group.cc); and that op's name, rebuilt in
  // place.
  std::shared_ptr<Work> done_work_;
  std::string inline_what_;  // the driving thread only
  // What inline_what_ holds: its number, and where its op's name was read.
  uint64_t inline_sequence_ = 0;
  const char* inline_op_ = nullptr;
  // The ranks' fingerprint check (COHORT_DEBUG=detail), else null; used by
  // the driving thread only.
  std::unique_ptr<DesyncCheck> desync_;
  // The flight recorder, and this group's place on the process's monitor
  // (stall warnings, dumps): diagnostics/group_trace.h, group_monitor.h.
  std::shared_ptr<GroupTrace> trace_;
  std::unique_ptr<MonitorLease> monitored_;
  std::thread worker_;
};

}  // namespace cohort
