// fingerprint.h: what a rank is about to call, as a fixed-size record the
// ranks of a group can exchange and compare (COHORT_DEBUG=detail).
//
// A Fingerprint holds the collective, dtype, element counts, root, reduce
// op and sequence number of one call. Fixed size, so that any backend can
// exchange it as plain bytes (all ranks run the same build, hence the same
// layout and byte order). Which fields must agree depends on the call: a
// rank's own count may differ from the others' where the API allows uneven
// sizes (all_gather, gather, scatter, reduce_scatter, all_to_all); then
// each rank also records a hash of the per-rank counts it expects, and the
// check is that those match the counts the ranks pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cohort/types.h"
#include "common/collective.h"

namespace cohort {

struct Fingerprint {
  static constexpr uint8_t kNoDType = 0xFF;
  static constexpr uint8_t kNoReduceOp = 0xFF;

  Fingerprint() = default;
  // A call without data (barrier).
  explicit Fingerprint(CollectiveCall call) : op(static_cast<uint8_t>(call)) {}
  // A call on `elements` of `type`: the buffer of broadcast, all_reduce and
  // reduce, the input of the gathers, the output of scatter and the
  // reduce-scatters, what all_to_all sends.
  Fingerprint(CollectiveCall call, DType type, size_t elements)
      : count(elements), op(static_cast<uint8_t>(call)), dtype(static_cast<uint8_t>(type)) {}

  Fingerprint& with_root(int r) {
    root = r;
    return *this;
  }
  Fingerprint& with_reduce_op(ReduceOp r) {
    reduce_op = r.kind;
    return *this;
  }
  // with_per_rank records the per-rank buffers this rank expects (rank q's
  // count at q); an empty list (gather/scatter off the root) records none.
  Fingerprint& with_per_rank(const std::vector<Buffer>& per_rank);
  // with_received records what all_to_all receives, in elements.
  Fingerprint& with_received(size_t elements) {
    total = elements;
    return *this;
  }

  uint64_t sequence = 0;
  uint64_t count = 0;   // this rank's own elements (see the constructor)
  uint64_t total = 0;   // with_per_rank: their sum; all_to_all: elements received
  uint64_t splits = 0;  // with_per_rank: a hash of the counts (never 0); 0: none
  int32_t root = -1;
  uint8_t op = 0;  // CollectiveCall
  uint8_t dtype = kNoDType;
  uint8_t reduce_op = kNoReduceOp;  // ReduceOp::Kind
  uint8_t reserved = 0;
};
static_assert(sizeof(Fingerprint) == 40, "exchanged as bytes: no hidden padding");

// describe writes a call as a person reads it:
// "all_reduce(float32, 1024 elements, SUM)", "broadcast(int64, 1 element, root 0)",
// "all_gather(float32, 4 elements, 12 in all)", "barrier()".
std::string describe(const Fingerprint& f);

// fingerprints_agree is true when the calls of ranks 0..size-1 (all[q] is
// rank q's) can run together: same call, sequence, dtype, root and reduce op,
// the counts that must be equal are, and per-rank counts match what each
// rank expects.
bool fingerprints_agree(const Fingerprint* all, int size);

// mismatch_report is the message every rank raises when the calls differ:
// "collective #5 of group default: ranks differ: ranks 0,2: all_reduce(float32,
// 1024 elements, SUM); rank 1: all_reduce(float32, 1000 elements, SUM)".
// Ranks with arrived[q] == 0 sent no fingerprint before the deadline; they
// are listed with `last`, the call all ranks agreed on before (#n-1), if any.
std::string mismatch_report(uint64_t sequence, const std::string& group, const Fingerprint* all,
                            const uint8_t* arrived, int size, const Fingerprint* last);

}  // namespace cohort
