// broadcast and reduce on a k-nomial tree (radix kKnomialRadix): ceil(log_k
// P) levels where the binomial tree (radix 2) takes ceil(log2 P), each rank
// sending to (or hearing from) up to k-1 children a level. For small
// buffers at many ranks, whose time is the tree's depth in latencies: at
// 1K ranks 5 levels instead of 10, for 3 sends a level instead of 1.
//
// Counted from the root, virtual rank v's digits in base k place it: its
// parent is v with its lowest nonzero digit cleared, and its children are
// v + j m for every place value m below that digit and j = 1..k-1 (the
// root, with no nonzero digit, has every place value below P). MPICH's
// k-nomial broadcast uses the same tree.
#include <cstring>

#include "algorithms/algorithms.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

struct KnomialPlace {
  int virtual_rank = 0;
  int parent = -1;  // virtual; -1 at the root
  int top = 1;      // children hang at the place values below this one
};

KnomialPlace knomial_place(int rank, int root, int p) {
  KnomialPlace at;
  at.virtual_rank = (rank - root + p) % p;
  const int v = at.virtual_rank;
  while (at.top < p) {
    const int digit_and_below = v % (at.top * kKnomialRadix);
    if (digit_and_below != 0) {
      at.parent = v - digit_and_below;
      return at;
    }
    at.top *= kKnomialRadix;
  }
  return at;
}

// The children at place value m (virtual ranks) into `out`; returns how
// many (at most kKnomialRadix - 1).
int children_at(int v, int m, int p, int* out) {
  int n = 0;
  for (int j = 1; j < kKnomialRadix && v + j * m < p; ++j) out[n++] = v + j * m;
  return n;
}

// A rank has at most k-1 children at each of its levels, and an int rank
// fits in 16 base-4 digits: no allocation per call.
constexpr int kMostChildren = (kKnomialRadix - 1) * 16;

}  // namespace

Status knomial_broadcast(AlgoContext& c, const Buffer& buf, int root) {
  const int p = c.transport.size();
  if (p == 1) return Status::ok_status();
  const KnomialPlace at = knomial_place(c.transport.rank(), root, p);
  auto real = [&](int v) { return (v + root) % p; };
  const size_t n = buf.bytes();
  if (at.parent >= 0) {
    Status st = sendrecv(c, 0, -1, nullptr, 0, real(at.parent), buf.data, n);
    if (!st.ok()) return st;
  }
  // Every child at once, the largest subtrees (highest place values) first.
  SendRequest sends[kMostChildren];
  size_t ns = 0;
  int children[kKnomialRadix - 1];
  for (int m = at.top / kKnomialRadix; m >= 1; m /= kKnomialRadix) {
    const int count = children_at(at.virtual_rank, m, p, children);
    for (int i = 0; i < count; ++i)
      sends[ns++] = SendRequest{real(children[i]), MessageKind::kCollective, c.tag(0), buf.data, n};
  }
  if (ns == 0) return Status::ok_status();
  return c.transport.exchange(sends, ns, nullptr, 0, c.deadline, c.what);
}

Status knomial_reduce(AlgoContext& c, const Buffer& buf, int root, ReduceOp::Kind op) {
  const int p = c.transport.size();
  if (p == 1) return Status::ok_status();
  const int r = c.transport.rank();
  const KnomialPlace at = knomial_place(r, root, p);
  auto real = [&](int v) { return (v + root) % p; };
  const size_t n = buf.bytes();
  // The root adds up in place; the others in scratch, leaving their input
  // as it was. A level's children land in slots of their own.
  const size_t own = r == root ? 0 : n;
  uint8_t* space = c.scratch_bytes(own + (kKnomialRadix - 1) * n);
  uint8_t* acc = r == root ? static_cast<uint8_t*>(buf.data) : space;
  uint8_t* incoming = space + own;
  if (own) std::memcpy(acc, buf.data, n);
  // The smallest subtrees finish first: level by level from place value 1.
  int children[kKnomialRadix - 1];
  RecvRequest recvs[kKnomialRadix - 1];
  for (int m = 1; m < at.top; m *= kKnomialRadix) {
    const int count = children_at(at.virtual_rank, m, p, children);
    if (count == 0) continue;
    for (int i = 0; i < count; ++i)
      recvs[i] = RecvRequest{real(children[i]), MessageKind::kCollective, c.tag(0), incoming + i * n, n};
    Status st = c.transport.exchange(nullptr, 0, recvs, static_cast<size_t>(count), c.deadline, c.what);
    if (!st.ok()) return st;
    for (int i = 0; i < count; ++i) reduce_into(buf.dtype, op, acc, incoming + i * n, buf.count);
  }
  if (at.parent < 0) return Status::ok_status();
  return sendrecv(c, 0, real(at.parent), acc, n, -1, nullptr, 0);
}

}  // namespace cohort
