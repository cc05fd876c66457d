// selection.h: which algorithm runs a collective, from one table.
//
// The table (selection.cc) scores by collective, message size and world
// size; COHORT_ALGO overrides it per collective
// ("all_reduce=ring,broadcast=binomial_tree").
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace cohort {

enum class Collective {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kGather,
  kScatter,
  kReduceScatter,
  kAllToAll,
  kBarrier
};

enum class Algorithm {
  kRing,
  kRecursiveDoubling,
  kHalvingDoubling,
  kBinomialTree,
  kDirect,
  kPairwise,
  kDissemination,
};

const char* collective_name(Collective c);
const char* algorithm_name(Algorithm a);

// choose_algorithm returns the algorithm for `bytes` (per rank) on
// `world_size` ranks. Fails with kInvalidArgument when COHORT_ALGO names an
// unknown algorithm, or one that cannot run that collective.
Result<Algorithm> choose_algorithm(Collective collective, size_t bytes, int world_size);

}  // namespace cohort
