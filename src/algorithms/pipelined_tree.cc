// Trees that a buffer goes down (or up) in segments: while a rank passes
// segment k-1 on to its children, segment k comes in from its parent, so a
// buffer of S segments reaches the deepest rank in depth + S - 1 hops of
// one segment, where the binomial tree takes ceil(log2 P) hops of the
// whole buffer.
//
// Two trees use it. pipelined_tree is the binary heap over the ranks
// counted from the root (virtual rank v has the parent (v-1)/2 and the
// children 2v+1 and 2v+2), for medium sizes at many ranks (64 KiB at 1K
// ranks: the binomial tree's hops each carry all of it); its reduce is the
// same tree run upwards, a rank adding its children's segment k while it
// sends its finished segment k-1 to its parent. The chain is the tree with
// one child each (root, root+1, ...), for large broadcasts over a network:
// each link carries the buffer once, at the price of P-1 hops of fill.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

// A rank's place in a tree: at most two children.
struct TreeLinks {
  int parent = -1;     // group rank; -1 at the root
  int children[2]{};   // group ranks
  int child_count = 0;
};

TreeLinks binary_tree_of(int rank, int root, int p) {
  const int v = (rank - root + p) % p;
  auto real = [&](int w) { return (w + root) % p; };
  TreeLinks t;
  if (v > 0) t.parent = real((v - 1) / 2);
  for (int w : {2 * v + 1, 2 * v + 2}) {
    if (w < p) t.children[t.child_count++] = real(w);
  }
  return t;
}

// Segments: the buffer in (about) eight, so that the depth's worth of
// fill costs little against the whole, but no smaller than 8 KiB (a hop's
// fixed cost stays small against its bytes) nor larger than 256 KiB.
// Whole elements each.
size_t segment_bytes(size_t total, size_t element_bytes) {
  const size_t wanted = std::min<size_t>(256 << 10, std::max<size_t>(8 << 10, total / 8));
  return std::max(element_bytes, wanted / element_bytes * element_bytes);
}

TreeLinks chain_of(int rank, int root, int p) {
  TreeLinks t;
  if (rank != root) t.parent = (rank - 1 + p) % p;
  if ((rank + 1) % p != root) t.children[t.child_count++] = (rank + 1) % p;
  return t;
}

struct TreeSegments {
  size_t size;   // bytes of each, the last may be shorter
  size_t count;  // at least one, of 0 bytes when the buffer is empty
  size_t total;
  size_t offset(size_t k) const { return k * size; }
  size_t length(size_t k) const { return std::min(size, total - k * size); }
};

TreeSegments cut_in_segments(size_t total, size_t size) {
  return TreeSegments{size, total == 0 ? 1 : (total + size - 1) / size, total};
}

TreeSegments cut_in_segments(const Buffer& buf) {
  return cut_in_segments(buf.bytes(), segment_bytes(buf.bytes(), dtype_size(buf.dtype)));
}

Status broadcast_down(AlgoContext& c, const Buffer& buf, const TreeLinks& tree, const TreeSegments& seg) {
  auto* data = static_cast<uint8_t*>(buf.data);
  // At step k the root sends segment k; any other rank receives segment k
  // while it passes segment k-1 on.
  for (size_t k = 0; k <= seg.count; ++k) {
    SendRequest sends[2];
    RecvRequest recv{};
    size_t ns = 0, nr = 0;
    const bool is_root = tree.parent < 0;
    if (is_root ? k < seg.count : k >= 1) {
      const size_t s = is_root ? k : k - 1;
      for (int i = 0; i < tree.child_count; ++i) {
        sends[ns++] = SendRequest{tree.children[i], MessageKind::kCollective, c.tag(static_cast<uint32_t>(s)),
                                  data + seg.offset(s), seg.length(s)};
      }
    }
    if (!is_root && k < seg.count) {
      recv = RecvRequest{tree.parent, MessageKind::kCollective, c.tag(static_cast<uint32_t>(k)),
                         data + seg.offset(k), seg.length(k)};
      nr = 1;
    }
    if (ns + nr == 0) continue;
    Status st = c.transport.exchange(sends, ns, &recv, nr, c.deadline, c.what);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

}  // namespace

size_t pipelined_tree_segment_bytes(size_t total, size_t element_bytes) {
  return segment_bytes(total, element_bytes);
}

// A chain's segment: an eighth of the buffer, so that the P-1 segments of
// fill cost little against the whole, between 16 KiB (a step's fixed cost
// stays small against its transfer) and 256 KiB (~1 ms at 2 Gbit/s).
size_t chain_segment_bytes(size_t total) {
  return std::min<size_t>(256 << 10, std::max<size_t>(16 << 10, total / 8));
}

Status pipelined_tree_broadcast(AlgoContext& c, const Buffer& buf, int root) {
  const int p = c.transport.size();
  if (p == 1) return Status::ok_status();
  return broadcast_down(c, buf, binary_tree_of(c.transport.rank(), root, p), cut_in_segments(buf));
}

Status chain_broadcast(AlgoContext& c, const Buffer& buf, int root) {
  const int p = c.transport.size();
  if (p == 1) return Status::ok_status();
  const TreeSegments seg = cut_in_segments(buf.bytes(), chain_segment_bytes(buf.bytes()));
  return broadcast_down(c, buf, chain_of(c.transport.rank(), root, p), seg);
}

Status pipelined_tree_reduce(AlgoContext& c, const Buffer& buf, int root, ReduceOp::Kind op) {
  const int p = c.transport.size();
  if (p == 1) return Status::ok_status();
  const int r = c.transport.rank();
  const TreeLinks tree = binary_tree_of(r, root, p);
  const TreeSegments seg = cut_in_segments(buf);
  const size_t es = dtype_size(buf.dtype);
  // The root adds up in place; the others in scratch, leaving their input
  // as it was. Each child's segment lands in its own slot.
  const size_t own = r == root ? 0 : seg.total;
  uint8_t* space = c.scratch_bytes(own + 2 * seg.size);
  uint8_t* acc = r == root ? static_cast<uint8_t*>(buf.data) : space;
  uint8_t* incoming = space + own;
  if (own) std::memcpy(acc, buf.data, own);
  // A rank with children finishes segment k at step k (once theirs are
  // added) and sends it up at step k+1; a leaf has all of them at once and
  // sends segment k at step k.
  const bool leaf = tree.child_count == 0;
  for (size_t k = 0; k <= seg.count; ++k) {
    SendRequest send{};
    RecvRequest recvs[2];
    size_t ns = 0, nr = 0;
    if (tree.parent >= 0 && (leaf ? k < seg.count : k >= 1)) {
      const size_t s = leaf ? k : k - 1;
      send = SendRequest{tree.parent, MessageKind::kCollective, c.tag(static_cast<uint32_t>(s)),
                         acc + seg.offset(s), seg.length(s)};
      ns = 1;
    }
    if (k < seg.count) {
      for (int i = 0; i < tree.child_count; ++i) {
        recvs[nr++] = RecvRequest{tree.children[i], MessageKind::kCollective, c.tag(static_cast<uint32_t>(k)),
                                  incoming + i * seg.size, seg.length(k)};
      }
    }
    if (ns + nr == 0) continue;
    Status st = c.transport.exchange(&send, ns, recvs, nr, c.deadline, c.what);
    if (!st.ok()) return st;
    for (size_t i = 0; i < nr; ++i)
      reduce_into(buf.dtype, op, acc + seg.offset(k), incoming + i * seg.size, seg.length(k) / es);
  }
  return Status::ok_status();
}

}  // namespace cohort
