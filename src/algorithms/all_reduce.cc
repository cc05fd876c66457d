// all_reduce: recursive doubling for small vectors, ring for large ones.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

// Recursive doubling: log2(P) steps, each exchanging the whole vector with
// the partner whose rank differs in one bit. For a world size that is not a
// power of two, the first 2*extra ranks pair up first: even ones hand their
// data to the odd one above and wait for the result, so that a power of two
// of ranks does the doubling. Every step combines the same two values on
// both partners, so all ranks end with bit-identical results.
Status recursive_doubling(AlgoContext& c, const Buffer& buf, ReduceOp::Kind op) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  const size_t bytes = buf.bytes();
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int extra = p - p2;
  uint8_t* tmp = c.scratch_bytes(bytes);
  uint32_t step = 0;

  int vrank;  // rank among the p2 that double; -1 for a rank that sits out
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      Status st = sendrecv(c, step, r + 1, buf.data, bytes, -1, nullptr, 0);
      if (!st.ok()) return st;
      vrank = -1;
    } else {
      Status st = sendrecv(c, step, -1, nullptr, 0, r - 1, tmp, bytes);
      if (!st.ok()) return st;
      reduce_into(buf.dtype, op, buf.data, tmp, buf.count);
      vrank = r / 2;
    }
  } else {
    vrank = r - extra;
  }
  ++step;
  if (vrank >= 0) {
    for (int mask = 1; mask < p2; mask <<= 1, ++step) {
      int vpartner = vrank ^ mask;
      int partner = vpartner < extra ? vpartner * 2 + 1 : vpartner + extra;
      Status st = sendrecv(c, step, partner, buf.data, bytes, partner, tmp, bytes);
      if (!st.ok()) return st;
      reduce_into(buf.dtype, op, buf.data, tmp, buf.count);
    }
  } else {
    step += static_cast<uint32_t>(__builtin_ctz(static_cast<unsigned>(p2)));
  }
  // Hand the result back to the ranks that sat out.
  if (r < 2 * extra) {
    if (r % 2 == 0) return sendrecv(c, step, -1, nullptr, 0, r + 1, buf.data, bytes);
    return sendrecv(c, step, r - 1, buf.data, bytes, -1, nullptr, 0);
  }
  return Status::ok_status();
}

// Recursive halving-doubling (Rabenseifner): a reduce-scatter by recursive
// halving (each step swaps half of what a rank still holds with its
// partner and reduces the half it keeps), then an all-gather by recursive
// doubling. log2(P) steps each way like recursive doubling, but only
// 2(P-1)/P of the vector moves, like the ring. Extra ranks of a world size
// that is not a power of two fold in first, as in recursive_doubling.
Status halving_doubling(AlgoContext& c, const Buffer& buf, ReduceOp::Kind op) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  const size_t es = dtype_size(buf.dtype);
  auto* base = static_cast<uint8_t*>(buf.data);
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int extra = p - p2;
  uint8_t* tmp = c.scratch_bytes(buf.bytes());
  uint32_t step = 0;
  int vrank;
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      Status st = sendrecv(c, step, r + 1, base, buf.bytes(), -1, nullptr, 0);
      if (!st.ok()) return st;
      vrank = -1;
    } else {
      Status st = sendrecv(c, step, -1, nullptr, 0, r - 1, tmp, buf.bytes());
      if (!st.ok()) return st;
      reduce_into(buf.dtype, op, base, tmp, buf.count);
      vrank = r / 2;
    }
  } else {
    vrank = r - extra;
  }
  ++step;
  auto real = [&](int v) { return v < extra ? v * 2 + 1 : v + extra; };
  if (vrank >= 0) {
    // lo/hi: the element range this rank is responsible for, per level.
    std::vector<std::pair<size_t, size_t>> ranges;
    size_t lo = 0, hi = buf.count;
    for (int mask = p2 / 2; mask > 0; mask >>= 1, ++step) {
      const int partner = real(vrank ^ mask);
      const size_t mid = lo + (hi - lo) / 2;
      const bool upper = (vrank & mask) != 0;
      const size_t keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
      const size_t give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
      Status st = sendrecv(c, step, partner, base + give_lo * es, (give_hi - give_lo) * es, partner, tmp,
                           (keep_hi - keep_lo) * es);
      if (!st.ok()) return st;
      reduce_into(buf.dtype, op, base + keep_lo * es, tmp, keep_hi - keep_lo);
      ranges.emplace_back(lo, hi);
      lo = keep_lo;
      hi = keep_hi;
    }
    for (int mask = 1; mask < p2; mask <<= 1, ++step) {
      const int partner = real(vrank ^ mask);
      const auto [parent_lo, parent_hi] = ranges.back();
      ranges.pop_back();
      // The partner holds the other half of the parent range.
      const size_t other_lo = lo == parent_lo ? hi : parent_lo;
      const size_t other_hi = lo == parent_lo ? parent_hi : lo;
      Status st = sendrecv(c, step, partner, base + lo * es, (hi - lo) * es, partner, base + other_lo * es,
                           (other_hi - other_lo) * es);
      if (!st.ok()) return st;
      lo = parent_lo;
      hi = parent_hi;
    }
  } else {
    step += 2 * static_cast<uint32_t>(__builtin_ctz(static_cast<unsigned>(p2)));
  }
  if (r < 2 * extra) {
    if (r % 2 == 0) return sendrecv(c, step, -1, nullptr, 0, r + 1, base, buf.bytes());
    return sendrecv(c, step, r - 1, base, buf.bytes(), -1, nullptr, 0);
  }
  return Status::ok_status();
}

// SegmentReduce streams one ring step's incoming block through a few
// segment-sized slots: each arriving segment is reduced into the
// accumulator, and its slot is posted again for the segment `slots` ahead.
// The slots stay in cache; a block-sized landing area would not.
struct SegmentReduce {
  DType dtype;
  ReduceOp::Kind op;
  uint8_t* into;       // the accumulator block
  size_t block_bytes;  // of the incoming block
  size_t segment;      // bytes per segment
  uint32_t slots;      // receives in flight
  uint64_t first_tag;  // tag of segment 0
  size_t elem;
  std::vector<uint32_t>* segment_of;  // per slot: which segment it holds
};

bool reduce_segment(void* context, RecvRequest& r) {
  auto* sr = static_cast<SegmentReduce*>(context);
  const uint32_t k = static_cast<uint32_t>(r.tag - sr->first_tag);
  reduce_into(sr->dtype, sr->op, sr->into + static_cast<size_t>(k) * sr->segment, r.data, r.bytes / sr->elem);
  const uint32_t next = k + sr->slots;
  const size_t off = static_cast<size_t>(next) * sr->segment;
  if (off >= sr->block_bytes) return false;
  r.tag = sr->first_tag + next;
  r.bytes = std::min(sr->segment, sr->block_bytes - off);
  return true;
}

// Ring: a reduce-scatter (P-1 steps; after it rank r holds the total of
// block r+1) then an all-gather of the totals (P-1 steps). Each rank sends
// and receives 2(P-1)/P of the vector, the least any algorithm can. Each
// step moves its block in segments, and each received segment is reduced
// while the next ones are still arriving.
// `first_step` numbers this ring's first step (its tags), so that the
// passes of one all_reduce (ring_in_passes) never share a tag.
Status ring(AlgoContext& c, const Buffer& buf, ReduceOp::Kind op, uint32_t first_step = 0) {
  constexpr uint32_t kSlots = 4;
  const int p = c.transport.size();
  const int r = c.transport.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const size_t es = dtype_size(buf.dtype);
  auto* base = static_cast<uint8_t*>(buf.data);
  size_t max_block = (buf.count + static_cast<size_t>(p) - 1) / static_cast<size_t>(p);
  const size_t seg = ring_segment_bytes(max_block * es, es);
  uint8_t* slots = c.scratch_bytes(kSlots * seg);
  std::vector<SendRequest> sends;
  std::vector<RecvRequest> recvs;
  uint32_t step = first_step;
  auto segments = [&](size_t bytes) { return bytes == 0 ? size_t{1} : (bytes + seg - 1) / seg; };
  auto tag = [&](uint32_t k) { return ring_segment_tag(c, step, k); };
  auto post_sends = [&](size_t offset, size_t bytes) {
    sends.clear();
    for (size_t k = 0; k < segments(bytes); ++k) {
      size_t off = k * seg;
      sends.push_back(SendRequest{right, MessageKind::kCollective, tag(static_cast<uint32_t>(k)),
                                  base + offset + off, bytes == 0 ? 0 : std::min(seg, bytes - off)});
    }
  };
  for (int s = 0; s < p - 1; ++s, ++step) {
    int send_block = (r - s + p) % p, recv_block = (r - s - 1 + 2 * p) % p;
    size_t sf, sn, rf, rn;
    block_range(buf.count, p, send_block, &sf, &sn);
    block_range(buf.count, p, recv_block, &rf, &rn);
    post_sends(sf * es, sn * es);
    SegmentReduce reduce{buf.dtype, op, base + rf * es, rn * es, seg, kSlots, tag(0), es, nullptr};
    recvs.clear();
    for (uint32_t k = 0; k < kSlots && k < segments(rn * es); ++k) {
      size_t off = static_cast<size_t>(k) * seg;
      RecvRequest q{left, MessageKind::kCollective, tag(k), slots + static_cast<size_t>(k) * seg,
                    rn * es == 0 ? 0 : std::min(seg, rn * es - off)};
      q.on_arrival = reduce_segment;
      q.context = &reduce;
      recvs.push_back(q);
    }
    Status st =
        c.transport.exchange(sends.data(), sends.size(), recvs.data(), recvs.size(), c.deadline, c.what);
    if (!st.ok()) return st;
  }
  for (int s = 0; s < p - 1; ++s, ++step) {
    int send_block = (r + 1 - s + p) % p, recv_block = (r - s + p) % p;
    size_t sf, sn, rf, rn;
    block_range(buf.count, p, send_block, &sf, &sn);
    block_range(buf.count, p, recv_block, &rf, &rn);
    post_sends(sf * es, sn * es);
    recvs.clear();
    for (size_t k = 0; k < segments(rn * es); ++k) {
      size_t off = k * seg;
      recvs.push_back(RecvRequest{left, MessageKind::kCollective, tag(static_cast<uint32_t>(k)),
                                  base + rf * es + off, rn * es == 0 ? 0 : std::min(seg, rn * es - off)});
    }
    Status st =
        c.transport.exchange(sends.data(), sends.size(), recvs.data(), recvs.size(), c.deadline, c.what);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

// A ring over a long vector runs as consecutive rings over pieces of
// kRingPassBytes (more with many ranks: each rank's block of a piece is at
// least kRingPassBlockBytes, one segment). Within one piece the block a rank
// reduced is still in cache when it sends it on in the all-gather half;
// over the whole vector it would have gone to memory and come back.
// Measured at 2 ranks over loopback TCP, 64 MiB (cohort-bench, 4 runs each,
// alternated): one ring 45-100 ms in the machine's slow minutes, passes of
// 1 MiB 21-38 ms, 2 MiB 19-40, 4 MiB 25-38, 8 MiB 30-34.
constexpr size_t kRingPassBytes = 1 << 20;
constexpr size_t kRingPassBlockBytes = 256 << 10;

Status ring_in_passes(AlgoContext& c, const Buffer& buf, ReduceOp::Kind op) {
  const size_t es = dtype_size(buf.dtype);
  const size_t p = static_cast<size_t>(c.transport.size());
  const size_t pass_bytes = std::max(kRingPassBytes, kRingPassBlockBytes * p);
  const size_t per_pass = std::max<size_t>(pass_bytes / es, p);
  const uint32_t steps_per_pass = 2 * static_cast<uint32_t>(p - 1);
  uint32_t first_step = 0;
  for (size_t done = 0, n = 0; done < buf.count; done += n, first_step += steps_per_pass) {
    // The last pass takes a remainder too short to split over the ranks.
    const size_t left = buf.count - done;
    n = left < per_pass + p ? left : per_pass;
    Buffer piece{static_cast<uint8_t*>(buf.data) + done * es, n, buf.dtype, buf.device};
    Status st = ring(c, piece, op, first_step);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

}  // namespace

Status sendrecv(AlgoContext& c, uint32_t step, int to, const void* send_data, size_t send_bytes, int from,
                void* recv_data, size_t recv_bytes) {
  SendRequest s{to, MessageKind::kCollective, c.tag(step), send_data, send_bytes};
  RecvRequest q{from, MessageKind::kCollective, c.tag(step), recv_data, recv_bytes};
  return c.transport.exchange(&s, to >= 0 ? 1 : 0, &q, from >= 0 ? 1 : 0, c.deadline, c.what);
}

Status all_reduce(AlgoContext& c, const Buffer& buf, ReduceOp::Kind op, Algorithm algorithm) {
  if (c.transport.size() == 1) return Status::ok_status();
  const bool splittable = buf.count >= static_cast<size_t>(c.transport.size());
  if (algorithm == Algorithm::kRing && splittable) return ring_in_passes(c, buf, op);
  if (algorithm == Algorithm::kHalvingDoubling && splittable) return halving_doubling(c, buf, op);
  return recursive_doubling(c, buf, op);
}

}  // namespace cohort
