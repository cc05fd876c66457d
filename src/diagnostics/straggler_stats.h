// straggler_stats.h: who the other ranks waited for, worked out from how
// long each rank spent inside the same collectives (docs/stragglers.md).
//
// A collective that every rank leaves together (all_reduce, all_gather,
// reduce_scatter, all_to_all, barrier) ends on every rank at about the
// moment the last rank's part arrived. So a rank's time inside it is its
// own wait plus the collective's work, and the rank that spent the least
// was the last to arrive: each other rank waited (its time - the least)
// for it, and the last rank's lateness is (the most - the least). Only
// durations are compared, each measured on its own rank's clock, so hosts
// need no common clock. Rooted collectives (broadcast, reduce, gather,
// scatter) are left out: a rank that is not on the root's path leaves
// early, and its short time would read as lateness.
//
// StragglerStats keeps the running statistics of one group in fixed
// memory: per rank how often it was last, the time the others waited for
// it, its own wait and the newest latenesses (for percentiles); per
// collective and power-of-two size class, the bus bandwidth measured by
// the last rank's time (the collective's work without the waiting).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/collective.h"
#include "common/json.h"

namespace cohort {

// leaves_together is true for the calls every rank leaves at once, the
// ones StragglerStats counts: those of the families common/collective.h
// says leave together, as the flight recorder names them (all_reduce and
// all_reduce_coalesced, all_gather and all_gather_into_tensor, ...).
// leave_together_index is the family's index there, or -1.
bool leaves_together(std::string_view op);
int leave_together_index(std::string_view op);

// A rank is named the straggler when it was last in at least this share
// of the collectives counted, with a median lateness of at least
// kStragglerMinLatenessNs: below that, being last is the noise of
// scheduling, not a rank holding the others back.
inline constexpr double kStragglerMinShareLast = 0.5;
inline constexpr int64_t kStragglerMinLatenessNs = 1000000;  // 1 ms

class StragglerStats {
 public:
  // How many latenesses each rank keeps for its percentiles.
  static constexpr size_t kRecentLateness = 128;

  explicit StragglerStats(int ranks);

  // add counts one collective: `durations_ns[r]` is the time rank r spent
  // in it; `op` its name and `bytes` what it moves per rank (the larger of
  // input and output). A size other than the group's is ignored.
  void add(const std::vector<int64_t>& durations_ns, std::string_view op, uint64_t bytes);

  struct RankView {
    int rank = 0;
    uint64_t times_last = 0;
    double waited_for_s = 0;   // the others' time waiting for this rank
    double wait_s = 0;         // this rank's own time waiting for others
    int last_waited_for = -1;  // whom it waited for most recently (-1: nobody yet)
    // Over the newest latenesses when it was last (0 when never last).
    double lateness_p50_s = 0, lateness_p90_s = 0, lateness_max_s = 0;
  };
  struct OpView {
    std::string op;
    uint64_t size_class = 0;  // bytes rounded up to a power of two
    uint64_t count = 0;
    double busbw_gbs = 0;  // GB/s (10^9), nccl-tests' bus bandwidth
  };

  int ranks() const { return static_cast<int>(ranks_.size()); }
  uint64_t collectives() const { return collectives_; }
  RankView rank(int r) const;
  // ranking lists the ranks by the time the others waited for them, most
  // first (ties: the lower rank first).
  std::vector<RankView> ranking() const;
  std::vector<OpView> ops() const;
  // straggler is the rank named (see kStragglerMinShareLast), or -1.
  int straggler() const;

  // to_json is the statistics as docs/stragglers.md shows them; `hosts`
  // (one per rank, or empty) names each rank's host.
  Json to_json(const std::vector<std::string>& hosts) const;

 private:
  struct PerRank {
    uint64_t times_last = 0;
    int64_t waited_for_ns = 0;
    int64_t wait_ns = 0;
    int last_waited_for = -1;
    std::array<int64_t, kRecentLateness> recent{};  // a ring of latenesses
    size_t recent_count = 0;                        // how many were written
  };
  struct PerOp {
    uint64_t count = 0;
    double bus_bytes = 0;  // bytes x the collective's bus factor
    int64_t work_ns = 0;   // the last rank's times
  };
  static constexpr int kOps = kLeaveTogether;  // the families counted
  static constexpr int kClasses = 48;  // size classes 2^0 .. 2^47
  std::vector<PerRank> ranks_;
  std::array<std::array<PerOp, kClasses>, kOps> ops_{};
  uint64_t collectives_ = 0;
};

// straggler_line says in one line what a summary (to_json's, with its
// "group") names: "rank 2 on host-a: last in 50 of 50 collectives of group
// default, median 20.1 ms late; the others waited 3.02 s for it", or that
// none was named.
std::string straggler_line(const Json& summary);

}  // namespace cohort
