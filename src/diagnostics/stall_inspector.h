// stall_inspector.h: warnings about operations pending too long, naming
// the ranks that have not joined them (COHORT_STALL_WARN_S).
//
// The process's monitor thread (group_monitor.h) calls tick() for each
// group a few times per threshold. A tick
//  - publishes this rank's progress (last collective started, completed)
//    under "stall/progress/<rank>" in the group's store when it changed: at
//    most once a second, or at once when a collective has been pending for
//    half the threshold (so that the ranks stuck with us are up to date
//    when we read them);
//  - when the running collective has been pending past the threshold, reads
//    every rank's progress and logs a warning naming those whose last
//    started collective is older; again at twice, four times ... the
//    threshold, until it ends;
//  - likewise warns when point-to-point operations are in flight and none
//    has finished for the threshold, naming the oldest one's peer.
// A rank that never published is taken to have started nothing. Store
// calls happen only here, on the monitor thread, never on a group's path;
// the first one that fails is logged and the inspector stops using that
// group's store.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace cohort {

class GroupTrace;

class StallInspector {
 public:
  // warn_s: the threshold in seconds (> 0).
  explicit StallInspector(double warn_s);

  // tick looks at `group` at `now_ns` (trace_clock_ns) and returns the
  // warnings it logged (for tests; usually none).
  std::vector<std::string> tick(GroupTrace& group, int64_t now_ns);

  // tick_interval_ns is how often the monitor should call tick.
  int64_t tick_interval_ns() const;

 private:
  // publish stores this rank's progress; `running`: a collective is pending.
  void publish(GroupTrace& group, uint64_t started, uint64_t completed, int64_t now_ns, bool running);
  std::string check_collective(GroupTrace& group, int64_t now_ns);
  std::string check_p2p(GroupTrace& group, int64_t now_ns);
  // late_ranks names the ranks whose published last started collective is
  // below `sequence`, with what they published; or says why it cannot.
  std::string late_ranks(GroupTrace& group, uint64_t sequence);
  // store_failed stops the use of the store, logging why: as a warning
  // when `warn`, else as information.
  void store_failed(GroupTrace& group, const std::exception& e, bool warn);

  const int64_t warn_ns_;
  // Publishing.
  bool store_ok_ = true;
  std::string store_error_;  // why the store failed
  uint64_t published_started_ = 0;
  uint64_t published_completed_ = 0;
  int64_t published_at_ns_ = 0;
  // The collective being watched and when its next warning is due (as
  // time pending).
  uint64_t watched_sequence_ = 0;
  int64_t next_warning_ns_ = 0;
  // Point-to-point: the finished count last seen and since when it holds.
  uint64_t p2p_finished_seen_ = 0;
  int64_t p2p_quiet_since_ns_ = 0;
  int64_t p2p_next_warning_ns_ = 0;
  bool p2p_watching_ = false;
};

// progress_key is the store key under which group rank `rank` publishes.
std::string progress_key(int rank);

}  // namespace cohort
