// broadcast and reduce on a binomial tree rooted at `root`: ceil(log2 P)
// rounds. Large broadcasts go down the tree in segments, so that a rank
// forwards segment k while its parent already sends segment k+1 (the
// chain, the tree's degenerate case, is in pipelined_tree.cc).
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

constexpr size_t kSegmentBytes = 1 << 20;

}  // namespace

Status broadcast(AlgoContext& c, const Buffer& buf, int root) {
  const int p = c.transport.size();
  if (p == 1) return Status::ok_status();
  const int vr = (c.transport.rank() - root + p) % p;
  auto real = [&](int v) { return (v + root) % p; };
  // The parent is vr with its lowest set bit cleared; children are vr + m
  // for each power of two m below that bit.
  int parent = -1;
  int low = 1;
  while (low < p) {
    if (vr & low) {
      parent = real(vr - low);
      break;
    }
    low <<= 1;
  }
  // For the root (no bit set) `low` ends as the first power of two >= p, so
  // the same loop below finds its children.
  auto* data = static_cast<uint8_t*>(buf.data);
  const size_t total = buf.bytes();
  const size_t segments = total == 0 ? 1 : (total + kSegmentBytes - 1) / kSegmentBytes;
  for (size_t k = 0; k < segments; ++k) {
    const uint32_t step = static_cast<uint32_t>(k);
    const size_t off = k * kSegmentBytes;
    const size_t n = std::min(kSegmentBytes, total - off);
    if (parent >= 0) {
      Status st = sendrecv(c, step, -1, nullptr, 0, parent, data + off, n);
      if (!st.ok()) return st;
    }
    SendRequest sends[32];
    size_t ns = 0;
    for (int m = low >> 1; m > 0; m >>= 1) {
      if (vr + m < p)
        sends[ns++] = SendRequest{real(vr + m), MessageKind::kCollective, c.tag(step), data + off, n};
    }
    Status st = c.transport.exchange(sends, ns, nullptr, 0, c.deadline, c.what);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

Status reduce(AlgoContext& c, const Buffer& buf, int root, ReduceOp::Kind op) {
  const int p = c.transport.size();
  if (p == 1) return Status::ok_status();
  const int r = c.transport.rank();
  const int vr = (r - root + p) % p;
  const size_t bytes = buf.bytes();
  // The root accumulates in place; the others in scratch, leaving their
  // input as it was.
  uint8_t* space = c.scratch_bytes(2 * bytes);
  uint8_t* acc = r == root ? static_cast<uint8_t*>(buf.data) : space;
  uint8_t* incoming = space + bytes;
  if (r != root && bytes) std::memcpy(acc, buf.data, bytes);
  uint32_t step = 0;
  for (int mask = 1; mask < p; mask <<= 1, ++step) {
    if (vr & mask) {
      int parent = ((vr - mask) + root) % p;
      return sendrecv(c, step, parent, acc, bytes, -1, nullptr, 0);
    }
    int child = vr + mask;
    if (child < p) {
      Status st = sendrecv(c, step, -1, nullptr, 0, (child + root) % p, incoming, bytes);
      if (!st.ok()) return st;
      reduce_into(buf.dtype, op, acc, incoming, buf.count);
    }
  }
  return Status::ok_status();
}

}  // namespace cohort
