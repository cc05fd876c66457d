// selection.h: which algorithm runs a collective, from one table.
//
// The table (selection.cc) chooses by collective, message size, world size
// and where the ranks are (one host with shared memory, several hosts with
// shared memory within each, or only the network); COHORT_ALGO overrides it
// per collective ("all_reduce=ring,broadcast=binomial_tree").
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
  kShmDirect,     // one host: straight through shared memory
  kHierarchical,  // several hosts: within each host, then between leaders
  kChain,         // broadcast down a pipelined chain of ranks
};

// Topology is where a group's ranks are, as far as the table cares.
enum class Topology {
  kNetwork,  // no two ranks share memory
  kOneHost,  // every rank on one host, sharing memory
  kHosts,    // several hosts, some with more than one rank sharing memory
};

const char* collective_name(Collective c);
const char* algorithm_name(Algorithm a);

// choose_algorithm returns the algorithm for `bytes` (per rank) on
// `world_size` ranks. Fails with kInvalidArgument when COHORT_ALGO names an
// unknown algorithm, or one that cannot run that collective.
Result<Algorithm> choose_algorithm(Collective collective, size_t bytes, int world_size,
                                   Topology topology = Topology::kNetwork);

// size_class_limit returns the largest size (bytes per rank) that the
// table's rule for `bytes` covers, SIZE_MAX for the open-ended ones: sizes
// with the same limit are chosen for alike (COHORT_DEBUG=info logs each
// class once).
size_t size_class_limit(Collective collective, size_t bytes, Topology topology);

// network_algorithm is the table's choice among the message-passing
// algorithms, without overrides (the leaders' step of a hierarchical one).
Algorithm network_algorithm(Collective collective, size_t bytes);

}  // namespace cohort
