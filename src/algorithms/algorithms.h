// algorithms.h: the collective algorithms, written only against Transport.
//
// Each function runs one collective to completion on the calling thread (the
// group's worker) and returns its Status. Ranks are group ranks. Buffers have
// been validated by the process group; sizes that still differ between ranks
// are caught by the transport (a message of the wrong length is a desync).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/selection.h"
#include "cohort/types.h"
#include "transport/transport.h"

namespace cohort {

class ChoiceLog;

// AlgoContext is what every algorithm needs besides its buffers.
struct AlgoContext {
  Transport& transport;
  uint64_t sequence;  // the group's sequence number of this op
  Deadline deadline;
  const std::string& what;        // "all_reduce #5 of group 0", for errors
  std::vector<uint8_t>& scratch;  // reused across operations; grows as needed
  // The tables for the step between hosts of a hierarchical collective:
  // all_reduce's among one leader a host, all_gather's and
  // reduce_scatter's within each column (every local rank's at once;
  // GroupShape::between_hosts). Null: the cost model's defaults.
  const AlgorithmTable* leaders = nullptr;
  const AlgorithmTable* columns = nullptr;
  // choices: where a shared-memory algorithm notes which way it went
  // (COHORT_DEBUG=info); null: nobody asked.
  ChoiceLog* choices = nullptr;
  // way: the way within the host that COHORT_ALGO forces on a
  // shared-memory algorithm (shm_ways.h), checked before the call;
  // kByRule: its rule decides.
  ShmWay way = ShmWay::kByRule;

  // tag makes each step's messages unique within the group.
  uint64_t tag(uint32_t step) const { return (sequence << 24) | (step & 0xFFFFFFu); }
  // scratch_bytes returns scratch space of at least n bytes.
  uint8_t* scratch_bytes(size_t n) {
    if (scratch.size() < n) scratch.resize(n);
    return scratch.data();
  }
};

// all_reduce reduces `buf` across ranks in place (op: SUM, PRODUCT, MIN,
// MAX, BAND, BOR, BXOR; the group handles AVG and PREMUL_SUM around it).
Status all_reduce(AlgoContext& c, const Buffer& buf, ReduceOp::Kind op, Algorithm algorithm);

// broadcast copies root's `buf` into every rank's.
Status broadcast(AlgoContext& c, const Buffer& buf, int root);
// chain_broadcast passes root's `buf` down the chain root, root+1, ... in
// segments: each link carries it once (a tree's root sends it to each of
// its children), at the price of P-1 segments of fill.
Status chain_broadcast(AlgoContext& c, const Buffer& buf, int root);

// chain_segment_bytes: a chain's segment for a buffer of `total` bytes.
size_t chain_segment_bytes(size_t total);

// scatter_all_gather_broadcast: the root scatters 1/P of `buf` to each
// rank, then Bruck's all_gather assembles it everywhere (large buffers at
// many ranks).
Status scatter_all_gather_broadcast(AlgoContext& c, const Buffer& buf, int root);

// reduce leaves the reduction of every rank's `buf` in root's; the others'
// buffers are left as they were.
Status reduce(AlgoContext& c, const Buffer& buf, int root, ReduceOp::Kind op);

// halving_gather_reduce: reduce as a recursive-halving reduce_scatter,
// then a binomial gather of the reduced blocks into the root (large
// buffers at many ranks).
Status halving_gather_reduce(AlgoContext& c, const Buffer& buf, int root, ReduceOp::Kind op);

// pipelined_tree_broadcast and pipelined_tree_reduce: down (up) a binary
// tree in segments, each rank passing one segment on while the next comes
// in (medium sizes at many ranks; pipelined_tree.cc).
Status pipelined_tree_broadcast(AlgoContext& c, const Buffer& buf, int root);
Status pipelined_tree_reduce(AlgoContext& c, const Buffer& buf, int root, ReduceOp::Kind op);
// knomial_broadcast and knomial_reduce: on a tree of radix kKnomialRadix,
// ceil(log_k P) levels of up to k-1 children each (small buffers at many
// ranks; knomial_tree.cc).
constexpr int kKnomialRadix = 4;
Status knomial_broadcast(AlgoContext& c, const Buffer& buf, int root);
Status knomial_reduce(AlgoContext& c, const Buffer& buf, int root, ReduceOp::Kind op);

// pipelined_tree_segment_bytes: the trees' segment for a buffer of `total`
// bytes (whole elements), for the cost model.
size_t pipelined_tree_segment_bytes(size_t total, size_t element_bytes);

// all_gather fills outputs[q] with rank q's input on every rank (counts may
// differ between ranks; outputs[rank] may alias input).
Status all_gather(AlgoContext& c, const Buffer& input, const std::vector<Buffer>& outputs);

// bruck_all_gather: all_gather in ceil(log2 P) steps, for any P; its
// messages use the steps from `first_step` on.
Status bruck_all_gather(AlgoContext& c, const Buffer& input, const std::vector<Buffer>& outputs,
                        uint32_t first_step = 0);

// gather fills root's outputs[q] with rank q's input.
Status gather(AlgoContext& c, const Buffer& input, const std::vector<Buffer>& outputs, int root);

// scatter fills rank q's output with root's inputs[q].
Status scatter(AlgoContext& c, const Buffer& output, const std::vector<Buffer>& inputs, int root);

// reduce_scatter leaves in rank q's output the reduction of every rank's
// inputs[q].
Status reduce_scatter(AlgoContext& c, const Buffer& output, const std::vector<Buffer>& inputs,
                      ReduceOp::Kind op);

// halving_reduce_scatter: reduce_scatter by recursive halving, log2 P
// steps (two more when P is not a power of two).
Status halving_reduce_scatter(AlgoContext& c, const Buffer& output, const std::vector<Buffer>& inputs,
                              ReduceOp::Kind op);

// all_to_all sends inputs[q] to rank q, which receives it in outputs[rank].
Status all_to_all(AlgoContext& c, const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs);

// AllToAllShape: what every rank agrees on before an all_to_all that may
// take more than one algorithm: the largest block anywhere, and whether
// every block in the group has one size.
struct AllToAllShape {
  size_t largest;
  bool uniform;
};
// agree_all_to_all_shape: AllToAllShape from every rank's blocks, in
// ceil(log2 P) steps of 16 bytes.
Result<AllToAllShape> agree_all_to_all_shape(AlgoContext& c, const std::vector<Buffer>& outputs,
                                             const std::vector<Buffer>& inputs);
// bruck_all_to_all: the shape agreed, then Bruck's ceil(log2 P) steps where
// every block has one size, else the pairwise exchange.
Status bruck_all_to_all(AlgoContext& c, const std::vector<Buffer>& outputs,
                        const std::vector<Buffer>& inputs);
// bruck_all_to_all_uniform: Bruck's steps alone, for a group already
// agreed that every block has one size.
Status bruck_all_to_all_uniform(AlgoContext& c, const std::vector<Buffer>& outputs,
                                const std::vector<Buffer>& inputs);

// barrier returns once every rank has entered it.
Status barrier(AlgoContext& c);

// A ring step moves its block in segments: small enough that reducing one
// overlaps the arrival of the next, large enough that per-message costs
// stay small. A segment's tag is its step's in the high bits and its index
// in the low 12, so a step has at most kMaxRingSegments.
constexpr size_t kRingSegmentBytes = 256 << 10;
constexpr uint32_t kMaxRingSegments = 1u << 12;

// ring_segment_bytes: whole elements a segment, and never more segments
// than the tags allow for a block of up to `max_block_bytes`.
inline size_t ring_segment_bytes(size_t max_block_bytes, size_t element_bytes) {
  const size_t es = element_bytes;
  const size_t usual = std::max(es, kRingSegmentBytes / es * es);
  const size_t for_the_tags = (max_block_bytes + kMaxRingSegments - 1) / kMaxRingSegments / es * es + es;
  return std::max(usual, for_the_tags);
}

// column_pipeline_segments: how many segments the hierarchical
// all_gather's and reduce_scatter's pipeline cuts a block of `block_bytes`
// into (hierarchical_gather_scatter.cc; the cost model prices by it).
size_t column_pipeline_segments(size_t block_bytes);

// ring_segment_tag is segment k's tag in step `step` of a segmented ring.
inline uint64_t ring_segment_tag(const AlgoContext& c, uint32_t step, uint32_t k) {
  return c.tag(((step & 0xFFFu) << 12) | k);
}

// block_range splits n elements into p nearly equal blocks: block b is
// [first, first + count).
inline void block_range(size_t n, int p, int b, size_t* first, size_t* count) {
  size_t lo = n * static_cast<size_t>(b) / static_cast<size_t>(p);
  size_t hi = n * static_cast<size_t>(b + 1) / static_cast<size_t>(p);
  *first = lo;
  *count = hi - lo;
}

// sendrecv sends one message and receives one (either may be skipped with
// peer -1), in one exchange.
Status sendrecv(AlgoContext& c, uint32_t step, int to, const void* send_data, size_t send_bytes, int from,
                void* recv_data, size_t recv_bytes);

}  // namespace cohort
