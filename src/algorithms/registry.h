// registry.h: every collective algorithm cohort has, in one list.
//
// An entry says what the algorithm runs (which collectives, where the
// ranks may be, any P or powers of two only) and what it costs: dependent
// steps and bytes on each link, priced by the cost model for a group's
// shape and a size. The algorithm table (selection.h) takes the cheapest
// entry that can run; COHORT_ALGO can force any entry that can. Adding an
// algorithm: its own file, one entry here (registry.cc), its case in the
// message-passing dispatch (dispatch.cc; the shared-memory ones in
// native_backend.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/cost_model.h"
#include "common/collective.h"

namespace cohort {

enum class Algorithm {
  kRing,
  kRecursiveDoubling,
  kHalvingDoubling,
  kBinomialTree,
  kDirect,
  kPairwise,
  kDissemination,
  kShmDirect,         // one host: straight through shared memory
  kHierarchical,      // several hosts: within each host, then between leaders
  kChain,             // broadcast down a pipelined chain of ranks
  kBruck,             // all_gather in ceil(log2 P) steps
  kRecursiveHalving,  // reduce_scatter in log2 P steps
  kScatterAllGather,  // broadcast as a scatter, then Bruck's all_gather
  kHalvingGather,     // reduce as recursive halving, then a binomial gather
  kPipelinedTree,     // broadcast and reduce along a binary tree in segments
  kKnomialTree,       // broadcast and reduce on a tree of radix 4
  kHierarchicalShares,  // several hosts, equal ranks a host: all_reduce as a hierarchical
                        // reduce_scatter and all_gather, every local rank carrying a share
};

// AlgorithmCost prices one call of `bytes` (per rank, as the table counts
// them: a rank's block for all_gather, reduce_scatter, gather, scatter and
// all_to_all, the whole buffer for the others), in seconds.
using AlgorithmCost = double (*)(Collective collective, const GroupShape& shape, const CostModel& model,
                                 double bytes);

struct AlgorithmEntry {
  Algorithm algorithm;
  const char* name;
  uint32_t collectives;  // bit (1 << Collective) for each it runs
  uint32_t topologies;   // bit (1 << Topology) for each group it can run in
  AlgorithmCost price;  // in a model already crowded as the shape says (cost, below)
  const char* summary;  // steps and bytes, for cohort-info and docs
  // taken_on: bit (1 << Topology) for each group where the table takes
  // this entry whenever it runs the collective, whatever the model says
  // (measured faster there than the model can tell); 0 for most.
  uint32_t taken_on = 0;
  // even_hosts_only: runs only where every host holds the same number of
  // the group's ranks (two or more), as the columns of a host need.
  bool even_hosts_only = false;

  // cost: what one call of `bytes` costs in `shape`, the model crowded as
  // the shape's machines are (CostModel::on_crowded_machine).
  double cost(Collective c, const GroupShape& shape, const CostModel& model, double bytes) const {
    return price(c, shape, model.on_crowded_machine(shape.ranks_per_cpu), bytes);
  }
  bool runs(Collective c) const { return (collectives >> static_cast<int>(c)) & 1u; }
  bool fits(Topology t) const { return (topologies >> static_cast<int>(t)) & 1u; }
  bool taken(Topology t) const { return (taken_on >> static_cast<int>(t)) & 1u; }
  // can_run: it runs `c` in `shape` (the collective, the topology, the hosts' ranks).
  bool can_run(Collective c, const GroupShape& shape) const {
    return runs(c) && fits(shape.topology) && (!even_hosts_only || shape.hosts_hold_equal_ranks());
  }
};

// algorithm_registry: every entry, in a fixed order (ties go to the first).
const std::vector<AlgorithmEntry>& algorithm_registry();
const AlgorithmEntry& registry_entry(Algorithm a);
const char* algorithm_name(Algorithm a);
bool parse_algorithm(const std::string& name, Algorithm* out);

// why_cannot_run: "" when `a` can run `c` in `shape`, else the reason, for
// an override's refusal ("shm_direct needs every rank on one host").
std::string why_cannot_run(Algorithm a, Collective c, const GroupShape& shape);

// LowerBound: no algorithm runs `c` faster, in the cost model: ceil(log2 H)
// latencies between H hosts (information reaches one more host a step at
// best; one for gather, scatter and all_to_all, which need no relay;
// broadcast and reduce: the postal model's time to reach H hosts, each
// posting a message every message_s, each one-way, half a latency) or
// the bytes the busiest host's link must carry at its whole rate
// (all_reduce: 2(H-1)/H of the buffer; broadcast: the buffer; gather and
// scatter: the blocks of every rank off the root's host; all_gather,
// reduce_scatter, all_to_all: those, for each of a host's m ranks),
// whichever is larger. Each rank its own host: H = P, m = 1; one host: the
// rings' link, as if each rank were a host.
struct LowerBound {
  double seconds;
  bool latency_bound;  // the latency term is the larger
};
LowerBound lower_bound(Collective c, const GroupShape& shape, const CostModel& model, double bytes);

// cheapest: the cheapest entry that runs `c` in `shape`, with its cost.
Algorithm cheapest(Collective c, const GroupShape& shape, const CostModel& model, double bytes,
                   double* seconds = nullptr);

// cheapest_over: the entry for every size in [from, to] at once, as a
// table's size class needs: the one whose worst ratio to the cheapest at
// any size of the range is least (sampled across it on a log scale). A
// class priced at one end alone can take an algorithm that is slightly
// ahead there and well behind at the other end.
Algorithm cheapest_over(Collective c, const GroupShape& shape, const CostModel& model, double from,
                        double to);

}  // namespace cohort
