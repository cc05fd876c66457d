// The collective matrix's algorithm axis: every message-passing algorithm
// of the registry forced on (COHORT_ALGO) for each collective it runs,
// over TCP, at P = 2..9, 12 and 16 (non-powers of two fold ranks in and
// out), through the matrix's checks (every dtype and op, uneven sizes,
// every root; counts over 1 MiB in float32 and float16 only, which keeps
// its 150 cases to a few minutes on 2 cores). The list comes from the registry, so a new entry is tested
// without editing this file. shm_direct and hierarchical run in the
// matrix's shm and mixed paths, and the hierarchical collectives' step
// between hosts has an axis of its own (ColumnsMatrix).
#include <gtest/gtest.h>

#include "algorithms/registry.h"
#include "cohort/config.h"
#include "process_group/collective_checks.h"
#include "process_group/reference.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

struct Forced {
  Algorithm algorithm;
  Collective collective;
  int world;
};

std::vector<Forced> every_forced_algorithm() {
  std::vector<Forced> all;
  for (const AlgorithmEntry& e : algorithm_registry()) {
    if (!e.fits(Topology::kNetwork)) continue;
    for (int c = 0; c < kCollectives; ++c) {
      if (!e.runs(static_cast<Collective>(c))) continue;
      for (int world : {2, 3, 4, 5, 6, 7, 8, 9, 12, 16})
        all.push_back(Forced{e.algorithm, static_cast<Collective>(c), world});
    }
  }
  return all;
}

// The matrix's checks of one collective.
std::vector<void (*)(ProcessGroup&)> checks_of(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return {check_all_reduce_every_dtype_op_and_size};
    case Collective::kBroadcast:
      return {check_broadcast_from_every_root};
    case Collective::kReduce:
      return {check_reduce_every_dtype_op_and_size};
    case Collective::kAllGather:
      return {check_all_gather_uneven_and_into_one_tensor};
    case Collective::kGather:
    case Collective::kScatter:
      return {check_gather_and_scatter_at_every_root};
    case Collective::kReduceScatter:
      return {check_reduce_scatter_every_dtype_op_and_size, check_reduce_scatter_uneven_blocks,
              check_reduce_scatter_tensor_in_place};
    case Collective::kAllToAll:
      return {check_all_to_all_uneven_splits, check_all_to_all_even_splits};
    case Collective::kBarrier:
      return {check_barrier_and_async_work_in_order};
  }
  return {};
}

class AlgorithmMatrix : public ::testing::TestWithParam<Forced> {
 protected:
  void SetUp() override {
    const Forced& f = GetParam();
    set_config("COHORT_SHM", "off");
    large_count_dtypes() = LargeCountDtypes::kFloat32AndFloat16;
    set_config("COHORT_ALGO", std::string(collective_name(f.collective)) + "=" + algorithm_name(f.algorithm));
  }
  void TearDown() override {
    reset_config("COHORT_SHM");
    reset_config("COHORT_ALGO");
    large_count_dtypes() = LargeCountDtypes::kOnePerElementSize;
  }
};

TEST_P(AlgorithmMatrix, Check) {
  const Forced& f = GetParam();
  for (auto check : checks_of(f.collective)) run_ranks(f.world, check, std::chrono::seconds(120));
}

std::string forced_name(const ::testing::TestParamInfo<Forced>& info) {
  return std::string(algorithm_name(info.param.algorithm)) + "_" + collective_name(info.param.collective) +
         "_P" + std::to_string(info.param.world);
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, AlgorithmMatrix, ::testing::ValuesIn(every_forced_algorithm()),
                         forced_name);

// The step between hosts of a hierarchical all_gather and reduce_scatter
// (each column's, COHORT_ALGO's leaders. items) forced to each algorithm
// that can run it, on pretend hosts of 2 and 3 ranks sharing memory, 2 to
// 6 hosts (non-powers of two fold in and out); hosts of unequal size (7
// ranks, 2 a host) run flat, and must still agree.
struct BetweenHosts {
  Algorithm algorithm;
  Collective collective;
  int world;
  int per_host;
  bool leaders = true;  // forced for the step between hosts (leaders.), else for the whole collective
};

std::vector<BetweenHosts> every_columns_algorithm() {
  std::vector<BetweenHosts> all;
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    for (const AlgorithmEntry& e : algorithm_registry()) {
      if (!e.fits(Topology::kNetwork) || !e.runs(c)) continue;
      for (auto [world, per_host] : {std::pair{4, 2}, {6, 2}, {7, 2}, {10, 2}, {12, 2}, {9, 3}, {12, 3}})
        all.push_back(BetweenHosts{e.algorithm, c, world, per_host});
    }
  }
  return all;
}

class ColumnsMatrix : public ::testing::TestWithParam<BetweenHosts> {
 protected:
  void SetUp() override {
    const BetweenHosts& b = GetParam();
    set_config("COHORT_SHM_RANKS_PER_HOST", std::to_string(b.per_host));
    large_count_dtypes() = LargeCountDtypes::kFloat32AndFloat16;
    set_config("COHORT_ALGO", std::string(b.leaders ? "leaders." : "") + collective_name(b.collective) + "=" +
                                  algorithm_name(b.algorithm));
  }
  void TearDown() override {
    reset_config("COHORT_SHM_RANKS_PER_HOST");
    reset_config("COHORT_ALGO");
    large_count_dtypes() = LargeCountDtypes::kOnePerElementSize;
  }
};

TEST_P(ColumnsMatrix, Check) {
  const BetweenHosts& b = GetParam();
  for (auto check : checks_of(b.collective)) run_ranks(b.world, check, std::chrono::seconds(120));
}

std::string columns_name(const ::testing::TestParamInfo<BetweenHosts>& info) {
  return std::string(algorithm_name(info.param.algorithm)) + "_" + collective_name(info.param.collective) +
         "_P" + std::to_string(info.param.world) + "_" + std::to_string(info.param.per_host) + "_a_host";
}

INSTANTIATE_TEST_SUITE_P(BetweenHosts, ColumnsMatrix, ::testing::ValuesIn(every_columns_algorithm()),
                         columns_name);

// The hierarchical all_reduce's two ways, through the leaders and in
// shares (every local rank carrying its share), forced at every size the
// matrix checks (counts below P and not a multiple of P included: their
// rest goes through the leaders), on the same pretend hosts. A world of
// hosts of unequal size runs through the leaders whatever is forced, so
// the shares run only where every host is full.
std::vector<BetweenHosts> every_hierarchical_all_reduce() {
  std::vector<BetweenHosts> all;
  for (Algorithm a : {Algorithm::kHierarchical, Algorithm::kHierarchicalShares}) {
    for (auto [world, per_host] : {std::pair{4, 2}, {6, 2}, {12, 3}, {9, 3}})
      all.push_back(BetweenHosts{a, Collective::kAllReduce, world, per_host, false});
  }
  all.push_back(BetweenHosts{Algorithm::kHierarchical, Collective::kAllReduce, 7, 2, false});
  return all;
}

INSTANTIATE_TEST_SUITE_P(HierarchicalAllReduce, ColumnsMatrix,
                         ::testing::ValuesIn(every_hierarchical_all_reduce()), columns_name);

}  // namespace
}  // namespace cohort::testing
