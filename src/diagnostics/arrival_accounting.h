// arrival_accounting.h: always-on accounting of who the ranks of a group
// wait for (docs/stragglers.md), kept off the collectives' path.
//
// The flight recorder already stamps when each operation starts and ends
// on this rank; nothing is added to a collective. The process's monitor
// thread (group_monitor.h) calls tick() every COHORT_STRAGGLER_INTERVAL_S:
//  - it takes the collectives that leave together (straggler_stats.h)
//    which completed since its last look, keeping their time on this rank
//    in three windows of 128, for every sequence number, every 16th and
//    every 256th, so that ranks whose looks fall at different moments still
//    share sequence numbers, whatever the rate;
//  - it publishes this rank's record (host, current operation, steps a
//    second, the windows) under cohort/stragglers/<group>/rank/<r> in the
//    job's store (the store under the group's prefixes, Store::root);
//  - the group's rank 0 reads every rank's record, joins the sequence
//    numbers all ranks hold and not yet counted (from the finest window in
//    which they meet), adds them to its StragglerStats, and publishes the
//    group's summary under cohort/stragglers/<group>/summary; the other
//    ranks read that summary back, so every rank can report it;
//  - the group's rank 0 lists the group under cohort/stragglers/groups,
//    where cohort-top finds it.
// Store calls happen only here, on the monitor thread; the first one that
// fails is logged and the accounting stops using the store (the job's
// store goes with its rank 0 when the job ends).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/json.h"
#include "diagnostics/straggler_stats.h"

namespace cohort {

class GroupTrace;
class Store;

// straggler_interval_s is COHORT_STRAGGLER_INTERVAL_S, checked (0: off).
double straggler_interval_s();

// The store keys, relative to the job's store.
std::string stragglers_groups_key();
std::string stragglers_rank_key(const std::string& group, int rank);
std::string stragglers_summary_key(const std::string& group);

class ArrivalAccounting {
 public:
  static constexpr size_t kWindow = 128;
  static constexpr uint64_t kStrides[3] = {1, 16, 256};

  ArrivalAccounting(int rank, int size);

  // tick reads what `group` completed since the last tick, publishes, and
  // (on rank 0) joins; on the monitor thread only.
  void tick(GroupTrace& group, int64_t now_ns);

  // report is what this rank knows, for dumps, Python and the metrics
  // endpoint (any thread; no store call): {"rank", "host", "collectives",
  // "busy_s", "steps_per_s", "summary": the group's last summary or null}.
  Json report() const;

 private:
  struct Sample {
    uint64_t sequence = 0;  // 0: empty
    int64_t duration_ns = 0;
    uint8_t op = 0;  // index into straggler_stats' collectives
    uint64_t bytes = 0;
  };
  void take_completed(GroupTrace& group);
  void keep(const Sample& s);
  Json record(GroupTrace& group, int64_t unix_us) const;
  void join(GroupTrace& group, Store& store);
  bool usable(GroupTrace& group);
  void store_failed(GroupTrace& group, const std::exception& e);

  const int rank_;
  const int size_;
  const std::string host_;
  const std::string summary_dir_;  // COHORT_STRAGGLER_DIR, read once (see keep_summary_file)
  // The monitor thread's alone.
  uint64_t last_id_ = 0;        // the recorder's entries up to here are taken
  uint64_t last_sequence_ = 0;  // the newest collective kept
  std::array<std::array<Sample, kWindow>, 3> windows_{};
  std::string current_op_;
  uint64_t finished_at_last_tick_ = 0;
  int64_t last_tick_ns_ = 0;
  bool store_ok_ = true;
  bool listed_ = false;
  std::shared_ptr<Store> store_;    // the job's store, once found
  uint64_t joined_through_ = 0;     // rank 0: sequences up to here are counted
  StragglerStats stats_;            // rank 0
  std::vector<std::string> hosts_;  // rank 0: each rank's host, from its record
  // Read by report() on any thread.
  mutable std::mutex mu_;
  uint64_t collectives_ = 0;  // guarded by mu_
  int64_t busy_ns_ = 0;       // time in the collectives kept; guarded by mu_
  double steps_per_s_ = 0;    // guarded by mu_
  Json summary_;              // guarded by mu_
};

}  // namespace cohort
