// selection.h: which algorithm runs a collective, decided once per group.
//
// An AlgorithmTable is built when a group is made (and again when the
// config changes): for each collective and size class (powers of two of
// the bytes per rank) the cost model (cost_model.h) prices every entry of
// the registry (registry.h) that can run in the group's shape across the
// class, and the one least behind the cheapest anywhere in it wins
// (cheapest_over). COHORT_ALGO's overrides, parsed then, go on top:
//
//   collective=algorithm               every size
//   collective:LO-HI:algorithm         LO <= bytes per rank < HI (K, M, G:
//                                      KiB, MiB, GiB; no HI: no bound)
//   leaders.collective...              the leaders' step of a hierarchical
//                                      collective (between hosts)
//   ...=shm_direct.WAY                 shm_direct, the way within the host
//                                      forced too (shm_ways.h)
//
// An override that cannot run in this group is refused: the collective
// fails, naming the item and why, rather than running something else.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "algorithms/cost_model.h"
#include "algorithms/registry.h"
#include "algorithms/shm_ways.h"
#include "common/status.h"

namespace cohort {

class AlgorithmTable {
 public:
  AlgorithmTable() = default;
  // build: the table for `shape` under `model`, then `overrides` (COHORT_ALGO's
  // grammar; `leaders` takes the items prefixed "leaders." instead of the others).
  static AlgorithmTable build(const GroupShape& shape, const CostModel& model, const std::string& overrides,
                              bool leaders = false);
  // for_config: build with the config's cost model and COHORT_ALGO.
  static AlgorithmTable for_config(const GroupShape& shape, bool leaders = false);

  // choose: the algorithm for `bytes` per rank; an error when an override
  // for it was refused (or COHORT_ALGO could not be parsed).
  Result<Algorithm> choose(Collective collective, size_t bytes) const;
  // forced_way: the way within the host that an override forces on
  // shm_direct for `bytes` (ShmWay::kByRule: none).
  ShmWay forced_way(Collective collective, size_t bytes) const;
  // varies: more than one algorithm may run `collective` in this group
  // (by size, or by an override's range), so ranks that see different
  // sizes of one call must agree on the size before choosing.
  bool varies(Collective collective) const;
  // class_limit: the largest size alike to `bytes` (the same choice for
  // every size from the class's start to it), SIZE_MAX when unbounded.
  size_t class_limit(Collective collective, size_t bytes) const;
  const GroupShape& shape() const { return shape_; }

  // describe: the table in force, one line a collective and run of sizes
  // with the winner's predicted time and the runner-up's (cohort-info).
  std::string describe() const;
  // predictions: for each collective and each of `sizes` (bytes per rank),
  // the table's choice, its predicted time, the lower bound (registry.h)
  // and which term binds it, as a markdown table.
  std::string predictions(const std::vector<size_t>& sizes) const;

 private:
  // Classes: 0 bytes, then [2^(k-1), 2^k) for k = 1..64.
  static constexpr int kClasses = 65;
  static int class_of(size_t bytes);
  static size_t class_start(int k);
  static size_t class_end(int k);  // one past the last size in class k

  struct Override {
    size_t from, to;  // [from, to)
    Algorithm algorithm;
    ShmWay way;  // shm_direct.WAY; kByRule otherwise
    std::string item;
  };

  GroupShape shape_;
  CostModel model_{};
  std::array<std::array<Algorithm, kClasses>, kCollectives> chosen_{};
  std::array<std::vector<Override>, kCollectives> overrides_;
  std::array<Status, kCollectives> refused_{};  // an override for it that cannot run
  Status unparsable_;                           // COHORT_ALGO's grammar broken: every collective fails
};

// choose_algorithm: the table's choice for a flat or one-host group of
// `world_size` ranks or, for kHosts, of world_size ranks two a host (for
// tests and tools; groups keep their own table).
Result<Algorithm> choose_algorithm(Collective collective, size_t bytes, int world_size,
                                   Topology topology = Topology::kNetwork);

// parse_size: "64K" -> 65536 (K, M, G are powers of 1024); false when not a size.
bool parse_size(const std::string& text, size_t* out);

}  // namespace cohort
