#include "algorithms/selection.h"

#include <sstream>

#include "common/config_registry.h"

namespace cohort {
namespace {

struct Rule {
  Topology topology;  // kNetwork rules apply everywhere, after the others
  Collective collective;
  size_t max_bytes;  // the rule applies up to this many bytes per rank
  Algorithm algorithm;
};

constexpr size_t kAny = ~size_t{0};

// The table: the first rule that fits wins. Small all_reduce is latency
// bound (recursive doubling: log2 P steps of the whole vector); medium
// wants both few steps and little data (halving-doubling: 2 log2 P steps,
// 2(P-1)/P of the data); large is bandwidth bound (the pipelined ring moves
// the same minimum, in segments that overlap the reduction).
// On one host, the collectives that have a direct shared-memory version use
// it at every size (all_to_all too: through the rings, each pair's
// exchange was a message and its wake-up, 0.7 us for 8 bytes at 2 ranks
// against Open MPI's 0.25); gather and scatter move each byte once anyway
// and go through the shared-memory rings. Across hosts, all_reduce,
// all_gather and reduce_scatter go hierarchical (each byte over a host's
// link once). A large broadcast over the network goes down a pipelined
// chain: on a tree the root (and every inner rank) sends the whole buffer
// to each of its children, so its link carries it log2 P times; on a
// chain every link carries it once, and the segments overlap.
constexpr Rule kRules[] = {
    {Topology::kOneHost, Collective::kAllReduce, kAny, Algorithm::kShmDirect},
    {Topology::kOneHost, Collective::kBroadcast, kAny, Algorithm::kShmDirect},
    {Topology::kOneHost, Collective::kReduce, kAny, Algorithm::kShmDirect},
    {Topology::kOneHost, Collective::kAllGather, kAny, Algorithm::kShmDirect},
    {Topology::kOneHost, Collective::kReduceScatter, kAny, Algorithm::kShmDirect},
    {Topology::kOneHost, Collective::kAllToAll, kAny, Algorithm::kShmDirect},
    {Topology::kOneHost, Collective::kBarrier, kAny, Algorithm::kShmDirect},
    {Topology::kHosts, Collective::kAllReduce, kAny, Algorithm::kHierarchical},
    {Topology::kHosts, Collective::kAllGather, kAny, Algorithm::kHierarchical},
    {Topology::kHosts, Collective::kReduceScatter, kAny, Algorithm::kHierarchical},
    {Topology::kNetwork, Collective::kAllReduce, 16 * 1024, Algorithm::kRecursiveDoubling},
    {Topology::kNetwork, Collective::kAllReduce, 1024 * 1024, Algorithm::kHalvingDoubling},
    {Topology::kNetwork, Collective::kAllReduce, kAny, Algorithm::kRing},
    {Topology::kNetwork, Collective::kBroadcast, 32 * 1024, Algorithm::kBinomialTree},
    {Topology::kNetwork, Collective::kBroadcast, kAny, Algorithm::kChain},
    {Topology::kNetwork, Collective::kReduce, kAny, Algorithm::kBinomialTree},
    {Topology::kNetwork, Collective::kAllGather, kAny, Algorithm::kRing},
    {Topology::kNetwork, Collective::kGather, kAny, Algorithm::kDirect},
    {Topology::kNetwork, Collective::kScatter, kAny, Algorithm::kDirect},
    {Topology::kNetwork, Collective::kReduceScatter, kAny, Algorithm::kRing},
    {Topology::kNetwork, Collective::kAllToAll, kAny, Algorithm::kPairwise},
    {Topology::kNetwork, Collective::kBarrier, kAny, Algorithm::kDissemination},
};

// What each algorithm can run.
bool can_run(Algorithm a, Collective c) {
  switch (a) {
    case Algorithm::kRing:
      return c == Collective::kAllReduce || c == Collective::kAllGather || c == Collective::kReduceScatter;
    case Algorithm::kRecursiveDoubling:
    case Algorithm::kHalvingDoubling:
      return c == Collective::kAllReduce;
    case Algorithm::kBinomialTree:
      return c == Collective::kBroadcast || c == Collective::kReduce;
    case Algorithm::kDirect:
      return c == Collective::kGather || c == Collective::kScatter;
    case Algorithm::kPairwise:
      return c == Collective::kAllToAll;
    case Algorithm::kDissemination:
      return c == Collective::kBarrier;
    case Algorithm::kShmDirect:
      return c == Collective::kAllReduce || c == Collective::kBroadcast || c == Collective::kReduce ||
             c == Collective::kAllGather || c == Collective::kReduceScatter || c == Collective::kAllToAll ||
             c == Collective::kBarrier;
    case Algorithm::kHierarchical:
      return c == Collective::kAllReduce || c == Collective::kAllGather || c == Collective::kReduceScatter;
    case Algorithm::kChain:
      return c == Collective::kBroadcast;
  }
  return false;
}

// Where each algorithm can run: the message-passing ones anywhere.
bool fits(Algorithm a, Topology t) {
  if (a == Algorithm::kShmDirect) return t == Topology::kOneHost;
  if (a == Algorithm::kHierarchical) return t == Topology::kHosts;
  return true;
}

bool parse_algorithm(const std::string& name, Algorithm* out) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling,
                      Algorithm::kBinomialTree, Algorithm::kDirect, Algorithm::kPairwise,
                      Algorithm::kDissemination, Algorithm::kShmDirect, Algorithm::kHierarchical,
                      Algorithm::kChain}) {
    if (name == algorithm_name(a)) return *out = a, true;
  }
  return false;
}

}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kGather:
      return "gather";
    case Collective::kScatter:
      return "scatter";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kBarrier:
      return "barrier";
  }
  return "?";
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRecursiveDoubling:
      return "recursive_doubling";
    case Algorithm::kHalvingDoubling:
      return "halving_doubling";
    case Algorithm::kBinomialTree:
      return "binomial_tree";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kPairwise:
      return "pairwise";
    case Algorithm::kDissemination:
      return "dissemination";
    case Algorithm::kShmDirect:
      return "shm_direct";
    case Algorithm::kHierarchical:
      return "hierarchical";
    case Algorithm::kChain:
      return "chain";
  }
  return "?";
}

Algorithm network_algorithm(Collective collective, size_t bytes) {
  for (const Rule& r : kRules) {
    if (r.topology == Topology::kNetwork && r.collective == collective && bytes <= r.max_bytes)
      return r.algorithm;
  }
  return Algorithm::kDirect;  // unreachable: every collective has a network rule
}

size_t size_class_limit(Collective collective, size_t bytes, Topology topology) {
  for (const Rule& r : kRules) {
    if ((r.topology == topology || r.topology == Topology::kNetwork) && r.collective == collective &&
        bytes <= r.max_bytes)
      return r.max_bytes;
  }
  return kAny;
}

Result<Algorithm> choose_algorithm(Collective collective, size_t bytes, int world_size, Topology topology) {
  (void)world_size;  // every algorithm here handles every world size
  // Read COHORT_ALGO again only when the config changed: the registry's
  // lookup costs more than a small collective over shared memory.
  thread_local uint64_t seen_generation = ~uint64_t{0};
  thread_local std::string overrides;
  if (config_generation() != seen_generation) {
    seen_generation = config_generation();
    overrides = config_string(knobs::kAlgo);
  }
  if (!overrides.empty()) {
    std::stringstream ss(overrides);
    std::string item;
    while (std::getline(ss, item, ',')) {
      auto eq = item.find('=');
      if (eq == std::string::npos) {
        return invalid_argument("COHORT_ALGO item '" + item + "' is not collective=algorithm");
      }
      if (item.substr(0, eq) != collective_name(collective)) continue;
      Algorithm a;
      if (!parse_algorithm(item.substr(eq + 1), &a)) {
        return invalid_argument("COHORT_ALGO names unknown algorithm '" + item.substr(eq + 1) + "'");
      }
      if (!can_run(a, collective)) {
        return invalid_argument(std::string("COHORT_ALGO: ") + algorithm_name(a) + " cannot run " +
                                collective_name(collective));
      }
      // shm_direct on a group that spans hosts (or hierarchical on one
      // host) cannot run: the table's choice stands.
      if (fits(a, topology)) return a;
      break;
    }
  }
  for (const Rule& r : kRules) {
    if ((r.topology == topology || r.topology == Topology::kNetwork) && r.collective == collective &&
        bytes <= r.max_bytes)
      return r.algorithm;
  }
  return invalid_argument(std::string("no algorithm for ") + collective_name(collective));
}

}  // namespace cohort
