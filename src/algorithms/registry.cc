#include "algorithms/registry.h"

#include <algorithm>
#include <cmath>

#include "algorithms/algorithms.h"

namespace cohort {
namespace {

constexpr uint32_t bit(Collective c) {
  return 1u << static_cast<int>(c);
}
constexpr uint32_t bit(Topology t) {
  return 1u << static_cast<int>(t);
}
constexpr uint32_t kAnywhere = bit(Topology::kNetwork) | bit(Topology::kOneHost) | bit(Topology::kHosts);

int ceil_log2(int p) {
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  return steps;
}
int floor_log2(int p) {
  int steps = 0;
  while ((2 << steps) <= p) ++steps;
  return steps;
}
// Ranks beyond the largest power of two fold in before and out after.
bool folds(int p) {
  return (p & (p - 1)) != 0;
}

// The costs. P ranks, n bytes, a = the link's latency, n/B its transfer.
// A step that exchanges (sends to one partner and waits for another's
// message) pays the whole latency; a step of a tree or chain, whose
// sender moves on without waiting, half of it: the next call's messages
// are already on the way (at 8 ranks over TCP here a binomial broadcast of
// 2 KiB took 35 us for 3 steps, Bruck's all_gather of 32 B 160-180 us).
double one_way_seconds(const LinkCost& l, double bytes) {
  return l.latency_s / 2 + bytes / l.bytes_per_s;
}

double ring_cost(Collective c, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const double p = s.ranks;
  if (c == Collective::kAllGather) return (p - 1) * l.seconds(n);
  // The reduce-scatter's segments are reduced while the next ones arrive:
  // a segment's reduction shows, the rest hides behind the link.
  const double block = c == Collective::kReduceScatter ? n : n / p;
  const double reduce_scatter =
      (p - 1) * l.seconds(block) + m.reduce_s(std::min<double>(block, kRingSegmentBytes)) * (p - 1);
  if (c == Collective::kReduceScatter) return reduce_scatter;
  return reduce_scatter + (p - 1) * l.seconds(block);  // all_reduce: then an all_gather
}

double recursive_doubling_cost(Collective, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const int steps = floor_log2(s.ranks) + (folds(s.ranks) ? 2 : 0);
  return steps * l.seconds(n) + floor_log2(s.ranks) * m.reduce_s(n);
}

double halving_doubling_cost(Collective, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const int p2 = 1 << floor_log2(s.ranks);
  const double moved = 2.0 * (p2 - 1) / p2 * n + (folds(s.ranks) ? 2 * n : 0.0);
  const int steps = 2 * floor_log2(s.ranks) + (folds(s.ranks) ? 2 : 0);
  return steps * l.latency_s + moved / l.bytes_per_s + m.reduce_s(n);
}

double binomial_tree_cost(Collective c, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const int steps = ceil_log2(s.ranks);
  return steps * one_way_seconds(l, n) + (c == Collective::kReduce ? steps * m.reduce_s(n) : 0.0);
}

// Down a tree (or up) in segments: the first segment reaches the deepest
// rank after `depth` hops, each a one-way latency and a segment's work;
// every later segment comes one segment's work behind it, its latency
// hidden behind the segments already in flight.
double segmented_cost(const LinkCost& l, double depth, double segments, double segment_work) {
  return depth * (l.latency_s / 2 + segment_work) + (segments - 1) * segment_work;
}

double chain_cost(Collective, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const double segment = static_cast<double>(chain_segment_bytes(static_cast<size_t>(n)));
  const double segments = std::max(1.0, std::ceil(n / segment));
  return (s.ranks - 1 + segments - 1) * one_way_seconds(l, std::min(n, segment));
}

double bruck_cost(Collective c, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const double p = s.ranks;
  if (c == Collective::kAllToAll) {
    // ceil(log2 P) steps of about half the slots, each packed and unpacked.
    // Agreeing on the blocks' size first is not Bruck's cost: even splits
    // need none, and uneven ones agree before any choice where the table
    // varies, whichever algorithm then runs (NativeBackend::all_to_all).
    const int steps = ceil_log2(s.ranks);
    const double half = std::ceil(p / 2) * n;
    return steps * l.latency_s + steps * (half / l.bytes_per_s + 2 * m.copy_s(half)) + 2 * m.copy_s(p * n);
  }
  // The blocks go into a rotated copy and out again.
  return ceil_log2(s.ranks) * l.latency_s + (p - 1) * n / l.bytes_per_s + 2 * m.copy_s(p * n);
}

double recursive_halving_cost(Collective, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const double p = s.ranks;
  const int p2 = 1 << floor_log2(s.ranks);
  const bool fold = folds(s.ranks);
  const double moved = (p2 - 1.0) / p2 * p * n + (fold ? p * n + n : 0.0);
  const int steps = floor_log2(s.ranks) + (fold ? 2 : 0);
  return steps * l.latency_s + moved / l.bytes_per_s +
         m.reduce_s((p2 - 1.0) / p2 * p * n + (fold ? p * n : 0)) + m.copy_s(p * n);
}

double scatter_all_gather_cost(Collective, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const double p = s.ranks;
  const double spread = (p - 1) / p * n;
  // The root posts P-1 sends: at 16K ranks that, not the bytes, is the
  // scatter's cost (cohort-sim showed a 64 KiB broadcast at 120x its bound
  // before this term was here).
  return one_way_seconds(l, spread) + (p - 1) * m.message_s + bruck_cost(Collective::kAllGather, s, m, n / p);
}

double halving_gather_cost(Collective, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const double p = s.ranks;
  // The reduce_scatter of P blocks of n/P, then log2 P one-way steps into
  // the root, whose link takes in (P-1)/P of the buffer. Those steps pay a
  // whole latency each, not a tree's half: they start after exchanges that
  // every rank waits for, so no sender is a call ahead of its receiver
  // (cohort-sim at 1K ranks: 538 us for 64 KiB, which the half priced at 405).
  return recursive_halving_cost(Collective::kReduceScatter, s, m, n / p) +
         ceil_log2(s.ranks) * l.latency_s + (p - 1) / p * n / l.bytes_per_s;
}

// Down (or up) a binary tree in segments, each hop carrying a segment to
// both of a rank's children (or in from both, and adding them): a rank
// handles three messages a segment, its parent's and its children's. The
// depth is counted as the bound counts it, ceil(log2 P): the heap's is at
// most one hop less, which the second child's queued send gives back.
double pipelined_tree_cost(Collective c, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  const double segment =
      std::min(n, static_cast<double>(pipelined_tree_segment_bytes(static_cast<size_t>(n), 1)));
  const double segments = std::max(1.0, std::ceil(n / std::max(segment, 1.0)));
  const double fan = std::min(2, s.ranks - 1);
  const double work = fan * segment / l.bytes_per_s + (fan + 1) * m.message_s +
                      (c == Collective::kReduce ? m.reduce_s(fan * segment) : 0.0);
  return segmented_cost(l, ceil_log2(s.ranks), segments, work);
}

// A tree of radix k: ceil(log_k P) levels, each a rank's k-1 messages one
// after another on its link (a broadcast's sends, a reduce's receives and
// their reductions), their latencies overlapping.
double knomial_tree_cost(Collective c, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  int levels = 0;
  for (int reach = 1; reach < s.ranks; reach *= kKnomialRadix) ++levels;
  const double fan = std::min(kKnomialRadix - 1, s.ranks - 1);
  const double level = l.latency_s / 2 + fan * (m.message_s + n / l.bytes_per_s) +
                       (c == Collective::kReduce ? fan * m.reduce_s(n) : 0.0);
  return levels * level;
}

double direct_cost(Collective, const GroupShape& s, const CostModel& m, double n) {
  // Every message posted at once: the root's link carries P-1 blocks, and
  // the root handles P-1 messages.
  const LinkCost l = m.messages(s);
  return l.latency_s + (s.ranks - 1) * (m.message_s + n / l.bytes_per_s);
}

double pairwise_cost(Collective, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost l = m.messages(s);
  return l.latency_s + (s.ranks - 1) * (2 * m.message_s + n / l.bytes_per_s);
}

double dissemination_cost(Collective, const GroupShape& s, const CostModel& m, double) {
  return ceil_log2(s.ranks) * m.messages(s).latency_s;
}

double shm_direct_cost(Collective c, const GroupShape& s, const CostModel& m, double n) {
  const LinkCost& l = m.shm_direct;
  const double p = s.ranks;
  switch (c) {
    case Collective::kAllReduce:
      return 2 * l.latency_s + 2 * n / l.bytes_per_s + m.reduce_s(n);
    case Collective::kReduceScatter:
      return 2 * l.latency_s + p * n / l.bytes_per_s + m.reduce_s(n);
    case Collective::kReduce:
      return 2 * l.latency_s + n / l.bytes_per_s + m.reduce_s(n);
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return l.latency_s + p * n / l.bytes_per_s;
    default:
      return l.seconds(n);
  }
}

// Within each host through shared memory, then between hosts: the step
// between them is the cheapest flat algorithm there (selection.h's
// between-hosts tables make the same choice at run time).
double hierarchical_cost(Collective c, const GroupShape& s, const CostModel& m, double n) {
  double between = 0;
  if (c == Collective::kAllReduce) {
    cheapest(Collective::kAllReduce, GroupShape::between_hosts(s.hosts, 1), m, n, &between);
    return 2 * m.shm_direct.seconds(n) + m.reduce_s(n) + between;
  }
  // all_gather and reduce_scatter: each rank's column (its local index on
  // every host) exchanges its blocks, every column of a host at once over
  // the host's link; the host's copies of the whole result through shared
  // memory, before (reduce_scatter) or after.
  cheapest(c, GroupShape::between_hosts(s.hosts, s.most_per_host), m, n, &between);
  return m.shm_direct.seconds(s.ranks * n) + between +
         (c == Collective::kReduceScatter ? m.reduce_s(s.ranks * n) : 0.0);
}

// all_reduce in shares (hierarchical.cc): a hierarchical reduce_scatter
// then all_gather of P blocks, each column's ring carrying its block (the
// host's link shared by its columns) while the host copies the segments
// already through it: of the host's work (the copies in and out and the
// reduction) and the link's, the smaller shows for one segment only.
double hierarchical_shares_cost(Collective, const GroupShape& s, const CostModel& m, double n) {
  const GroupShape columns = GroupShape::between_hosts(s.hosts, s.most_per_host);
  const double block = n / s.ranks;
  const double segments = static_cast<double>(column_pipeline_segments(static_cast<size_t>(block)));
  const double link = ring_cost(Collective::kReduceScatter, columns, m, block) +
                      ring_cost(Collective::kAllGather, columns, m, block);
  const double host = 2 * m.shm_direct.seconds(n) + m.reduce_s(n);
  const double host_steps = 2 * segments * 2 * m.shm_direct.latency_s;  // each segment's two host steps
  return std::max(link, host) + std::min(link, host) / segments + host_steps;
}

const std::vector<AlgorithmEntry>& entries() {
  static const std::vector<AlgorithmEntry> kEntries = {
      {Algorithm::kShmDirect, "shm_direct",
       bit(Collective::kAllReduce) | bit(Collective::kBroadcast) | bit(Collective::kReduce) |
           bit(Collective::kAllGather) | bit(Collective::kReduceScatter) | bit(Collective::kAllToAll) |
           bit(Collective::kBarrier),
       bit(Topology::kOneHost), shm_direct_cost, "one host: flags and slots in shared memory, one or two steps",
       // On one host the direct collectives were measured faster than
       // message passing through the rings at every size and rank count
       // tried (docs/performance.md, "One host"), where the model's rates
       // put the ring ahead of a large all_reduce: a message-passing
       // algorithm runs on one host only when COHORT_ALGO forces it.
       bit(Topology::kOneHost)},
      {Algorithm::kHierarchical, "hierarchical",
       bit(Collective::kAllReduce) | bit(Collective::kAllGather) | bit(Collective::kReduceScatter),
       bit(Topology::kHosts), hierarchical_cost,
       "within each host through shared memory, then between hosts (each byte over a host's link once; "
       "all_reduce: through one leader a host)"},
      {Algorithm::kHierarchicalShares, "hierarchical_shares", bit(Collective::kAllReduce),
       bit(Topology::kHosts), hierarchical_shares_cost,
       "equal ranks a host: a hierarchical reduce_scatter and all_gather, every local rank carrying its "
       "share over the network, pipelined with the host's copies",
       0, true},
      {Algorithm::kRecursiveDoubling, "recursive_doubling", bit(Collective::kAllReduce), kAnywhere,
       recursive_doubling_cost, "log2 P steps of the whole vector"},
      {Algorithm::kHalvingDoubling, "halving_doubling", bit(Collective::kAllReduce), kAnywhere,
       halving_doubling_cost, "Rabenseifner: 2 log2 P steps, 2(P-1)/P of the data"},
      {Algorithm::kRing, "ring",
       bit(Collective::kAllReduce) | bit(Collective::kAllGather) | bit(Collective::kReduceScatter), kAnywhere,
       ring_cost, "P-1 steps (2(P-1) for all_reduce), (P-1)/P of the data each way, reduced as it lands"},
      {Algorithm::kBruck, "bruck", bit(Collective::kAllGather) | bit(Collective::kAllToAll), kAnywhere,
       bruck_cost,
       "ceil(log2 P) steps, (P-1)/P of the data, one copy in and out; all_to_all: the blocks' size agreed, "
       "then "
       "ceil(log2 P) steps of half the blocks (pairwise where they differ)"},
      {Algorithm::kRecursiveHalving, "recursive_halving", bit(Collective::kReduceScatter), kAnywhere,
       recursive_halving_cost, "log2 P steps, (P-1)/P of the data"},
      {Algorithm::kBinomialTree, "binomial_tree", bit(Collective::kBroadcast) | bit(Collective::kReduce),
       kAnywhere, binomial_tree_cost, "ceil(log2 P) steps of the whole buffer"},
      {Algorithm::kChain, "chain", bit(Collective::kBroadcast), kAnywhere, chain_cost,
       "P-1 segments of fill, then each link carries the buffer once"},
      {Algorithm::kScatterAllGather, "scatter_all_gather", bit(Collective::kBroadcast), kAnywhere,
       scatter_all_gather_cost, "a scatter from the root, then Bruck's all_gather: 2(P-1)/P of the data"},
      {Algorithm::kHalvingGather, "halving_gather", bit(Collective::kReduce), kAnywhere, halving_gather_cost,
       "recursive halving, then a binomial gather of the blocks: about 2 log2 P steps, 2(P-1)/P of the data"},
      {Algorithm::kPipelinedTree, "pipelined_tree", bit(Collective::kBroadcast) | bit(Collective::kReduce),
       kAnywhere, pipelined_tree_cost,
       "a binary tree in segments: ceil(log2 P) + S - 1 hops of a segment, twice the buffer a rank's link"},
      {Algorithm::kKnomialTree, "knomial_tree", bit(Collective::kBroadcast) | bit(Collective::kReduce),
       kAnywhere, knomial_tree_cost,
       "ceil(log4 P) levels of up to 3 children each, the whole buffer to each"},
      {Algorithm::kDirect, "direct", bit(Collective::kGather) | bit(Collective::kScatter), kAnywhere,
       direct_cost, "the root exchanges with every rank at once"},
      {Algorithm::kPairwise, "pairwise", bit(Collective::kAllToAll), kAnywhere, pairwise_cost,
       "every pair's exchange at once"},
      {Algorithm::kDissemination, "dissemination", bit(Collective::kBarrier), kAnywhere, dissemination_cost,
       "ceil(log2 P) rounds"},
  };
  return kEntries;
}

}  // namespace

const std::vector<AlgorithmEntry>& algorithm_registry() {
  return entries();
}

const AlgorithmEntry& registry_entry(Algorithm a) {
  for (const AlgorithmEntry& e : entries()) {
    if (e.algorithm == a) return e;
  }
  return entries().front();  // unreachable: every Algorithm has an entry
}

const char* algorithm_name(Algorithm a) {
  return registry_entry(a).name;
}

bool parse_algorithm(const std::string& name, Algorithm* out) {
  for (const AlgorithmEntry& e : entries()) {
    if (name == e.name) return *out = e.algorithm, true;
  }
  return false;
}

std::string why_cannot_run(Algorithm a, Collective c, const GroupShape& shape) {
  const AlgorithmEntry& e = registry_entry(a);
  if (!e.runs(c)) return std::string(e.name) + " cannot run " + collective_name(c);
  if (!e.fits(shape.topology)) {
    if (a == Algorithm::kShmDirect) return "shm_direct needs every rank on one host, with shared memory";
    if (a == Algorithm::kHierarchical)
      return "hierarchical needs several hosts with shared memory within them";
    return std::string(e.name) + " cannot run on " + shape.describe();
  }
  if (!e.can_run(c, shape)) {
    return std::string(e.name) + " needs the same number of ranks (two or more) on every host, and " +
           shape.describe() + " has not";
  }
  return "";
}

// The least time for a message to reach `ranks` ranks when every rank that
// has it may post it on every `post` seconds, each landing `flight` after
// it leaves (the postal model): the ranks reached by t are those reached
// by t - post and one more for each rank reached by t - flight. A rank
// posting one message a flight (post >= flight) gives the binomial tree's
// ceil(log2 P) flights; posting faster than that, a k-nomial tree beats it;
// posting free, the root reaches everyone in one flight.
double postal_reach_seconds(int ranks, double flight, double post) {
  if (ranks <= 1) return 0;
  if (post <= 0) return flight;
  if (post >= flight) return ceil_log2(ranks) * flight;
  // In whole posts, rounded down: a bound may be early, never late.
  const size_t lag = static_cast<size_t>(std::max(1.0, std::floor(flight / post)));
  std::vector<double> reached(lag, 1.0);  // reached[t]: by time t posts
  while (reached.back() < ranks) reached.push_back(reached.back() + reached[reached.size() - lag]);
  return static_cast<double>(reached.size() - 1) * post;
}

// A broadcast's (or, backwards, a reduce's) least time for `bytes`: some
// last piece of s bytes leaves the root only after the (bytes - s) before
// it, and then must reach every rank, each hop carrying its s bytes, each
// rank posting it on once its link is free. The least over s.
double one_way_bound_seconds(int ranks, const LinkCost& l, double message_s, double bytes) {
  double best = postal_reach_seconds(ranks, l.latency_s / 2 + bytes / l.bytes_per_s,
                                     message_s + bytes / l.bytes_per_s);
  for (double s = 64; s < bytes; s *= 2) {
    const double hop = s / l.bytes_per_s;
    const double last = postal_reach_seconds(ranks, l.latency_s / 2 + hop, message_s + hop);
    best = std::min(best, (bytes - s) / l.bytes_per_s + last);
  }
  return best;
}

LowerBound lower_bound(Collective c, const GroupShape& shape, const CostModel& model, double bytes) {
  // Across hosts what binds is a host's link: the bytes that must cross
  // it at its whole rate, and the steps between hosts (within a host they
  // are cheaper). Each rank its own host is the same with P hosts of one.
  const bool one_host = shape.topology == Topology::kOneHost;
  const LinkCost l = one_host ? model.messages(shape) : model.network;
  const double p = shape.ranks;
  const double hosts = one_host ? p : shape.hosts;
  const double m = one_host ? 1 : shape.most_per_host;
  const bool one_way = c == Collective::kBroadcast || c == Collective::kReduce;
  // gather, scatter and all_to_all need no relay: one step, if every
  // message could go at once.
  const bool direct = c == Collective::kGather || c == Collective::kScatter || c == Collective::kAllToAll;
  const int steps_between = ceil_log2(static_cast<int>(hosts));
  const double latency = hosts <= 1 ? 0.0
                         : direct   ? l.latency_s
                         : one_way  ? postal_reach_seconds(static_cast<int>(hosts), l.latency_s / 2,
                                                           model.message_s)
                                    : steps_between * l.latency_s;
  double carried = 0;  // over the busiest host's link, one way
  switch (c) {
    case Collective::kAllReduce:
      carried = 2 * (hosts - 1) / hosts * bytes;
      break;
    case Collective::kBroadcast:
    case Collective::kReduce:
      carried = hosts > 1 ? bytes : 0;
      break;
    case Collective::kBarrier:
      carried = 0;
      break;
    case Collective::kGather:
    case Collective::kScatter:  // the root's host: every other host's blocks
      carried = (p - m) * bytes;
      break;
    default:  // all_gather, reduce_scatter, all_to_all: each of a host's m ranks, every block from off it
      carried = (p - m) * m * bytes;
  }
  const double transfer = carried / l.bytes_per_s;
  // A broadcast's or reduce's latency and bytes bind together: the last
  // bytes out of the root still have the tree's depth to go.
  const double together =
      one_way && hosts > 1 ? one_way_bound_seconds(static_cast<int>(hosts), l, model.message_s, bytes) : 0.0;
  return LowerBound{std::max({latency, transfer, together}), latency >= transfer};
}

namespace {

// taken_entry: the entry the table takes for `c` in `shape` whatever the
// model says (AlgorithmEntry::taken_on), or null.
const AlgorithmEntry* taken_entry(Collective c, const GroupShape& shape) {
  for (const AlgorithmEntry& e : entries()) {
    if (e.can_run(c, shape) && e.taken(shape.topology)) return &e;
  }
  return nullptr;
}

}  // namespace

Algorithm cheapest(Collective c, const GroupShape& shape, const CostModel& model, double bytes,
                   double* seconds) {
  if (const AlgorithmEntry* e = taken_entry(c, shape)) {
    if (seconds) *seconds = e->cost(c, shape, model, bytes);
    return e->algorithm;
  }
  const AlgorithmEntry* best = nullptr;
  double best_s = 0;
  for (const AlgorithmEntry& e : entries()) {
    if (!e.can_run(c, shape)) continue;
    const double s = e.cost(c, shape, model, bytes);
    if (!best || s < best_s) best = &e, best_s = s;
  }
  if (seconds) *seconds = best_s;
  return best ? best->algorithm : Algorithm::kDirect;
}

Algorithm cheapest_over(Collective c, const GroupShape& shape, const CostModel& model, double from,
                        double to) {
  if (to <= from) return cheapest(c, shape, model, from);
  if (const AlgorithmEntry* e = taken_entry(c, shape)) return e->algorithm;
  // Five sizes spread evenly on a log scale, both ends included: for a
  // class of one doubling, every quarter of an octave.
  constexpr int kSamples = 5;
  double sizes[kSamples], best_at[kSamples];
  for (int i = 0; i < kSamples; ++i) {
    sizes[i] = from * std::pow(to / from, static_cast<double>(i) / (kSamples - 1));
    cheapest(c, shape, model, sizes[i], &best_at[i]);
  }
  const AlgorithmEntry* best = nullptr;
  double best_worst = 0;
  for (const AlgorithmEntry& e : entries()) {
    if (!e.can_run(c, shape)) continue;
    double worst = 0;
    for (int i = 0; i < kSamples; ++i) {
      const double s = e.cost(c, shape, model, sizes[i]);
      worst = std::max(worst, best_at[i] > 0 ? s / best_at[i] : (s > 0 ? HUGE_VAL : 1.0));
    }
    if (!best || worst < best_worst) best = &e, best_worst = worst;
  }
  return best ? best->algorithm : Algorithm::kDirect;
}

}  // namespace cohort
