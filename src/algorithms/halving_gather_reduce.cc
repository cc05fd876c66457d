// A large reduce as a reduce_scatter by recursive halving, then a binomial
// gather of the reduced blocks into the root: about 2 log2 P steps, and
// the root's link carries the buffer about twice, where a binomial tree
// carries all of it log2 P times (cohort-sim: a 16 MiB reduce at 1K-16K
// ranks at 12-17x its lower bound by the tree).
#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"

namespace cohort {

Status halving_gather_reduce(AlgoContext& c, const Buffer& buf, int root, ReduceOp::Kind op) {
  const int p = c.transport.size();
  if (p == 1) return Status::ok_status();
  if (buf.count < static_cast<size_t>(p)) return reduce(c, buf, root, op);
  const int r = c.transport.rank();
  const size_t es = dtype_size(buf.dtype);
  const size_t bytes = buf.bytes();
  // Block v of the buffer is reduced by the rank v places after the root,
  // so that each subtree of the gather holds one contiguous run of blocks.
  auto place = [&](int q) { return (q - root + p) % p; };
  std::vector<size_t> at(static_cast<size_t>(p) + 1, 0);
  for (int v = 0; v < p; ++v) {
    size_t first, count;
    block_range(buf.count, p, v, &first, &count);
    at[static_cast<size_t>(v) + 1] = (first + count) * es;
  }
  auto* data = static_cast<uint8_t*>(buf.data);
  std::vector<Buffer> inputs(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) {
    const size_t v = static_cast<size_t>(place(q));
    inputs[static_cast<size_t>(q)] = Buffer{data + at[v], (at[v + 1] - at[v]) / es, buf.dtype, buf.device};
  }
  // The root gathers into its buffer; the others into scratch past the
  // 2 x bytes that recursive halving takes, so their input stays as it was.
  uint8_t* gathered = r == root ? data : c.scratch_bytes(3 * bytes) + 2 * bytes;
  const int me = place(r);
  const size_t mine = static_cast<size_t>(me);
  const Buffer block{gathered + at[mine], (at[mine + 1] - at[mine]) / es, buf.dtype, buf.device};
  Status st = halving_reduce_scatter(c, block, inputs, op);
  if (!st.ok()) return st;
  // Binomial gather: with `mask` a place holds its run [me, me + mask).
  constexpr uint32_t kGatherSteps = 64;  // above recursive halving's steps
  uint32_t step = kGatherSteps;
  auto end_of = [&](int v) { return at[static_cast<size_t>(std::min(v, p))]; };
  for (int mask = 1; mask < p; mask <<= 1, ++step) {
    if (me & mask) {
      const int parent = (me - mask + root) % p;
      return sendrecv(c, step, parent, gathered + at[mine], end_of(me + mask) - at[mine], -1, nullptr, 0);
    }
    const int child = me + mask;
    if (child < p) {
      const size_t from = at[static_cast<size_t>(child)];
      st =
          sendrecv(c, step, -1, nullptr, 0, (child + root) % p, gathered + from, end_of(child + mask) - from);
      if (!st.ok()) return st;
    }
  }
  return Status::ok_status();
}

}  // namespace cohort
