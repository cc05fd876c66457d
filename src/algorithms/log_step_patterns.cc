// The collectives that many ranks need in about log2 P dependent steps,
// for any P (not only powers of two): all_gather by Bruck's algorithm,
// reduce_scatter by recursive halving, and a large broadcast as a scatter
// followed by an all_gather. A ring takes P-1 steps: at 32 ranks over TCP
// its all_gather of 16 KiB a rank ran 4.5x behind Open MPI's (issue 48).
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

// The largest power of two not above p.
int power_of_two_below(int p) {
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  return p2;
}

}  // namespace

// Bruck: the blocks sit in scratch in this rank's rotated order (its own
// first, then rank r+1's, ...). In step k, with d = 2^k, a rank holds the
// d blocks from its own on: it sends the first min(d, P-d) of them to rank
// r-d and appends the same number from rank r+d, whose first blocks are
// exactly the ones it lacks. ceil(log2 P) steps; each block crosses P-1
// links in all, as on the ring; the price is one copy out of scratch.
// Counts may differ between ranks: every rank knows every block's size.
Status bruck_all_gather(AlgoContext& c, const Buffer& input, const std::vector<Buffer>& outputs,
                        uint32_t first_step) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  auto block = [&](int i) -> const Buffer& { return outputs[static_cast<size_t>((r + i) % p)]; };
  std::vector<size_t> at(static_cast<size_t>(p) + 1, 0);
  for (int i = 0; i < p; ++i) at[static_cast<size_t>(i) + 1] = at[static_cast<size_t>(i)] + block(i).bytes();
  uint8_t* rotated = c.scratch_bytes(at.back());
  if (input.bytes()) std::memcpy(rotated, input.data, input.bytes());
  uint32_t step = first_step;
  for (int have = 1; have < p; ++step) {
    const int n = std::min(have, p - have);
    const int to = (r - have + p) % p, from = (r + have) % p;
    Status st = sendrecv(c, step, to, rotated, at[static_cast<size_t>(n)], from,
                         rotated + at[static_cast<size_t>(have)],
                         at[static_cast<size_t>(have + n)] - at[static_cast<size_t>(have)]);
    if (!st.ok()) return st;
    have += n;
  }
  for (int i = 0; i < p; ++i) {
    const Buffer& out = block(i);
    if (i == 0 && out.data == input.data) continue;
    if (out.bytes()) std::memcpy(out.data, rotated + at[static_cast<size_t>(i)], out.bytes());
  }
  return Status::ok_status();
}

// Recursive halving: the P blocks are laid end to end in scratch; in each
// step a rank keeps half of the blocks it still reduces, sends the other
// half to its partner, and adds the partner's copy of its half into its
// own. log2 P steps, and (P-1)/P of the data leaves each rank, as on the
// ring. For P not a power of two, the first 2*extra ranks pair up first:
// the even one hands its whole input to the odd one above it, which then
// stands for both (its share is both their blocks) and hands the even one
// its block at the end.
Status halving_reduce_scatter(AlgoContext& c, const Buffer& output, const std::vector<Buffer>& inputs,
                              ReduceOp::Kind op) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  const size_t es = dtype_size(output.dtype);
  std::vector<size_t> at(static_cast<size_t>(p) + 1, 0);
  for (int q = 0; q < p; ++q)
    at[static_cast<size_t>(q) + 1] = at[static_cast<size_t>(q)] + inputs[static_cast<size_t>(q)].bytes();
  const size_t total = at.back();
  uint8_t* acc = c.scratch_bytes(2 * total);
  uint8_t* incoming = acc + total;
  for (int q = 0; q < p; ++q) {
    const Buffer& in = inputs[static_cast<size_t>(q)];
    if (in.bytes()) std::memcpy(acc + at[static_cast<size_t>(q)], in.data, in.bytes());
  }
  const int p2 = power_of_two_below(p);
  const int extra = p - p2;
  auto combine = [&](size_t from, size_t to) {
    reduce_into(output.dtype, op, acc + from, incoming + from, (to - from) / es);
  };
  uint32_t step = 0;
  int vrank = r - extra;  // place among the p2 that halve; -1 for a rank that sits out
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      Status st = sendrecv(c, step, r + 1, acc, total, -1, nullptr, 0);
      if (!st.ok()) return st;
      vrank = -1;
    } else {
      Status st = sendrecv(c, step, -1, nullptr, 0, r - 1, incoming, total);
      if (!st.ok()) return st;
      combine(0, total);
      vrank = r / 2;
    }
  }
  ++step;
  // The first real rank whose block place v reduces (place p2: one past the end).
  auto first_rank = [&](int v) { return v < extra ? 2 * v : v + extra; };
  auto offset = [&](int v) { return at[static_cast<size_t>(first_rank(v))]; };
  if (vrank >= 0) {
    int lo = 0, hi = p2;
    for (int mask = p2 / 2; mask >= 1; mask /= 2, ++step) {
      const int vpartner = vrank ^ mask;
      const int partner = vpartner < extra ? 2 * vpartner + 1 : vpartner + extra;
      const int mid = lo + mask;
      const bool keep_low = (vrank & mask) == 0;
      const int keep_lo = keep_low ? lo : mid, keep_hi = keep_low ? mid : hi;
      const int send_lo = keep_low ? mid : lo, send_hi = keep_low ? hi : mid;
      Status st = sendrecv(c, step, partner, acc + offset(send_lo), offset(send_hi) - offset(send_lo),
                           partner, incoming + offset(keep_lo), offset(keep_hi) - offset(keep_lo));
      if (!st.ok()) return st;
      combine(offset(keep_lo), offset(keep_hi));
      lo = keep_lo;
      hi = keep_hi;
    }
  } else {
    step += static_cast<uint32_t>(__builtin_ctz(static_cast<unsigned>(p2)));
  }
  if (r < 2 * extra) {
    if (r % 2 == 0) return sendrecv(c, step, -1, nullptr, 0, r + 1, output.data, output.bytes());
    Status st = sendrecv(c, step, r - 1, acc + at[static_cast<size_t>(r - 1)],
                         inputs[static_cast<size_t>(r - 1)].bytes(), -1, nullptr, 0);
    if (!st.ok()) return st;
  }
  if (output.bytes()) std::memmove(output.data, acc + at[static_cast<size_t>(r)], output.bytes());
  return Status::ok_status();
}

// A large broadcast at many ranks: the root sends each rank its own
// 1/P of the buffer (every send posted at once), then Bruck's all_gather
// assembles the whole buffer everywhere. About 2 log2 P latencies and
// twice the data per link, where a binomial tree moves all of it log2 P
// times over the root's link and a chain pays P-1 segments of fill.
Status scatter_all_gather_broadcast(AlgoContext& c, const Buffer& buf, int root) {
  const int p = c.transport.size();
  if (p == 1) return Status::ok_status();
  if (buf.count < static_cast<size_t>(p)) return broadcast(c, buf, root);
  const int r = c.transport.rank();
  const size_t es = dtype_size(buf.dtype);
  auto* data = static_cast<uint8_t*>(buf.data);
  // Block v belongs to the rank v places after the root.
  std::vector<Buffer> blocks(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) {
    size_t first, count;
    block_range(buf.count, p, (q - root + p) % p, &first, &count);
    blocks[static_cast<size_t>(q)] = Buffer{data + first * es, count, buf.dtype, buf.device};
  }
  const Buffer& mine = blocks[static_cast<size_t>(r)];
  if (r == root) {
    std::vector<SendRequest> sends;
    for (int q = 0; q < p; ++q) {
      if (q != root)
        sends.push_back(SendRequest{q, MessageKind::kCollective, c.tag(0),
                                    blocks[static_cast<size_t>(q)].data,
                                    blocks[static_cast<size_t>(q)].bytes()});
    }
    Status st = c.transport.exchange(sends.data(), sends.size(), nullptr, 0, c.deadline, c.what);
    if (!st.ok()) return st;
  } else {
    Status st = sendrecv(c, 0, -1, nullptr, 0, root, mine.data, mine.bytes());
    if (!st.ok()) return st;
  }
  return bruck_all_gather(c, mine, blocks, 1);
}

}  // namespace cohort
