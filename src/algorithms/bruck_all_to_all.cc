// all_to_all in ceil(log2 P) steps by Bruck's algorithm, for small blocks
// at many ranks: pairwise posts P-1 messages a rank, and at 1K ranks its 4
// bytes a block cost 52x the lower bound (cohort-sim); Bruck's moves each
// block about log2 P / 2 times instead.
//
// A rank relays blocks between other ranks, so it must know their sizes,
// which only their sender and receiver know. Bruck runs only where every
// block in the group has one size, which the ranks agree on first
// (agree_all_to_all_shape: a dissemination MIN of 16 bytes); otherwise
// all take the pairwise exchange.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"

namespace cohort {
namespace {

// The steps' tags: past the pairwise exchange's (0).
constexpr uint32_t kAgreeStep = 100;
constexpr uint32_t kBruckStep = 140;

// This rank's view: its block size if every block it sends and receives
// has that size, else -1.
int64_t uniform_block(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs) {
  const size_t b = inputs.empty() ? 0 : inputs[0].bytes();
  for (size_t q = 0; q < inputs.size(); ++q) {
    if (inputs[q].bytes() != b || outputs[q].bytes() != b) return -1;
  }
  return static_cast<int64_t>(b);
}

}  // namespace

Result<AllToAllShape> agree_all_to_all_shape(AlgoContext& c, const std::vector<Buffer>& outputs,
                                             const std::vector<Buffer>& inputs) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  size_t largest = 0;
  for (const Buffer& b : inputs) largest = std::max(largest, b.bytes());
  // MIN of (uniform block, -largest block): MIN is idempotent, so in
  // dissemination's ceil(log2 P) rounds hearing of a rank twice is harmless.
  int64_t mine[2] = {uniform_block(outputs, inputs), -static_cast<int64_t>(largest)};
  uint32_t step = kAgreeStep;
  for (int d = 1; d < p; d <<= 1, ++step) {
    int64_t theirs[2] = {mine[0], mine[1]};
    Status st = sendrecv(c, step, (r + d) % p, mine, sizeof mine, (r - d + p) % p, theirs, sizeof theirs);
    if (!st.ok()) return st;
    mine[0] = std::min(mine[0], theirs[0]);
    mine[1] = std::min(mine[1], theirs[1]);
  }
  return AllToAllShape{static_cast<size_t>(-mine[1]), mine[0] >= 0};
}

// Slot i of this rank first holds its block for rank r+i. In step k, with
// d = 2^k, the slots whose bit k is set go to rank r+d, and the same slots
// come in from rank r-d; after the last step slot i holds rank r-i's block
// for this rank (each slot's block has come from r - (i's low bits)).
Status bruck_all_to_all_uniform(AlgoContext& c, const std::vector<Buffer>& outputs,
                                const std::vector<Buffer>& inputs) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  const size_t b = inputs[0].bytes();
  const size_t n = static_cast<size_t>(p);
  const size_t moved = (n + 1) / 2 * b;  // the most slots a step moves
  uint8_t* slots = c.scratch_bytes(n * b + 2 * moved);
  uint8_t* out = slots + n * b;
  uint8_t* in = out + moved;
  for (size_t i = 0; i < n; ++i) {
    if (b) std::memcpy(slots + i * b, inputs[(static_cast<size_t>(r) + i) % n].data, b);
  }
  uint32_t step = kBruckStep;
  for (int d = 1; d < p; d <<= 1, ++step) {
    size_t packed = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i & static_cast<size_t>(d)) {
        if (b) std::memcpy(out + packed, slots + i * b, b);
        packed += b;
      }
    }
    Status st = sendrecv(c, step, (r + d) % p, out, packed, (r - d + p) % p, in, packed);
    if (!st.ok()) return st;
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i & static_cast<size_t>(d)) {
        if (b) std::memcpy(slots + i * b, in + at, b);
        at += b;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (b) std::memcpy(outputs[(static_cast<size_t>(r) + n - i) % n].data, slots + i * b, b);
  }
  return Status::ok_status();
}

Status bruck_all_to_all(AlgoContext& c, const std::vector<Buffer>& outputs,
                        const std::vector<Buffer>& inputs) {
  if (c.transport.size() == 1) return all_to_all(c, outputs, inputs);
  auto shape = agree_all_to_all_shape(c, outputs, inputs);
  if (!shape.ok()) return shape.status();
  if (!shape.value().uniform) return all_to_all(c, outputs, inputs);
  return bruck_all_to_all_uniform(c, outputs, inputs);
}

}  // namespace cohort
