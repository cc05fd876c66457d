#include "algorithms/selection.h"

#include <sstream>

#include "common/config_registry.h"

namespace cohort {
namespace {

struct Rule {
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
constexpr Rule kRules[] = {
    {Collective::kAllReduce, 16 * 1024, Algorithm::kRecursiveDoubling},
    {Collective::kAllReduce, 1024 * 1024, Algorithm::kHalvingDoubling},
    {Collective::kAllReduce, kAny, Algorithm::kRing},
    {Collective::kBroadcast, kAny, Algorithm::kBinomialTree},
    {Collective::kReduce, kAny, Algorithm::kBinomialTree},
    {Collective::kAllGather, kAny, Algorithm::kRing},
    {Collective::kGather, kAny, Algorithm::kDirect},
    {Collective::kScatter, kAny, Algorithm::kDirect},
    {Collective::kReduceScatter, kAny, Algorithm::kRing},
    {Collective::kAllToAll, kAny, Algorithm::kPairwise},
    {Collective::kBarrier, kAny, Algorithm::kDissemination},
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
  }
  return false;
}

bool parse_algorithm(const std::string& name, Algorithm* out) {
  for (Algorithm a :
       {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling,
        Algorithm::kBinomialTree, Algorithm::kDirect, Algorithm::kPairwise, Algorithm::kDissemination}) {
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
  }
  return "?";
}

Result<Algorithm> choose_algorithm(Collective collective, size_t bytes, int world_size) {
  (void)world_size;  // every algorithm here handles every world size
  std::string overrides = config_string(knobs::kAlgo);
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
      return a;
    }
  }
  for (const Rule& r : kRules) {
    if (r.collective == collective && bytes <= r.max_bytes) return r.algorithm;
  }
  return invalid_argument(std::string("no algorithm for ") + collective_name(collective));
}

}  // namespace cohort
