// shm_direct_gather_scatter.cc: broadcast, all_gather and reduce_scatter
// among the ranks of one host, where each rank's part goes to the others
// (or, in a reduce_scatter, each rank's blocks to their owners): through
// the posts when small, else chunk by chunk through the slots; a large
// all_gather or broadcast may read the others' buffers in place
// (process_vm_readv), and an all_gather through symmetric memory. The
// shared helpers are in shm_direct_internal.h.
#include "algorithms/shm_direct.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/shm_direct_internal.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {
using namespace shm_direct_internal;  // NOLINT: the helpers of every direct collective

// An all_gather's first slot holds, instead of the rank's first chunk,
// where its input lies in symmetric memory (a SymmetricRegistry::Place)
// when its stamp's word says this.
constexpr uint64_t kSlotHoldsPlace = 2;

// symmetric_place: where `input` lies among this rank's symmetric
// allocations (id 0: in none).
shm::SymmetricRegistry::Place symmetric_place(const shm::HostSlots& a, const Buffer& input) {
  const shm::SymmetricRegistry& registry = *a.symmetric();
  if (registry.empty()) return {};
  return registry.place_of(a.local_index(), input.data, input.bytes());
}

// read_symmetric copies local rank q's input, published in its slot `half`
// as a place in symmetric memory, into `out` through this rank's mapping.
Status read_symmetric(AlgoContext& c, shm::HostSlots& a, int q, int half, const Buffer& out) {
  shm::SymmetricRegistry::Place theirs;
  std::memcpy(&theirs, a.slot(q, half), sizeof theirs);
  std::shared_ptr<ShmSegment> hold;
  const uint8_t* at = a.symmetric()->region_of(q, theirs.id, theirs.offset, out.bytes(), &hold);
  if (!at) {
    return invalid_argument("rank " + std::to_string(a.local_ranks()[static_cast<size_t>(q)]) +
                            "'s input to " + c.what + " lies in symmetric allocation #" +
                            std::to_string(theirs.id) +
                            ", which this rank does not hold (freed, or never allocated here): allocate and "
                            "free symmetric memory on every rank of the group alike");
  }
  std::memcpy(out.data, at, out.bytes());
  return Status::ok_status();
}

// begin_single_copy stamps this rank's op and buffer address, waits until
// every rank has (so their buffers are ready to read), and checks that all
// run the same op.
Status begin_single_copy(AlgoContext& c, shm::HostSlots& a, shm::HostSlots::Stamp mine, const void* buffer,
                         int* half) {
  mine.word = reinterpret_cast<uint64_t>(buffer);
  Status st = next_half(c, a, true, half);
  if (!st.ok()) return st;
  a.stamp(*half, mine);
  st = arrive_and_wait_all(c, a);
  if (st.ok()) st = check_stamps(a, -1, *half, mine, c.what);
  return st;
}

// post_broadcast: the root posts, the others read its post.
Status post_broadcast(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, int root) {
  const int me = a.local_index();
  const auto mine = op_stamp(c, Collective::kBroadcast, root, buf.bytes());
  int cell;
  Status st = next_post(c, a, me == root, &cell);
  if (!st.ok()) return st;
  if (me == root) {
    publish_post(a, cell, mine, buf.data, buf.bytes());
  } else {
    st = await_post(c, a, root, cell, mine, one_way_arrival(a));
    if (!st.ok()) return st;
    if (buf.bytes()) std::memcpy(buf.data, a.post(root, cell), buf.bytes());
  }
  end_one_way(a, cell);
  return Status::ok_status();
}

// post_all_gather: every rank posts its input and reads everyone's post.
// Up to 40 bytes a post shares its stamp's cache line: one miss per peer.
Status post_all_gather(AlgoContext& c, shm::HostSlots& a, const Buffer& input,
                       const std::vector<Buffer>& outputs, size_t most) {
  const int p = a.local_size(), me = a.local_index();
  const auto mine = op_stamp(c, Collective::kAllGather, -1, most);
  int cell;
  Status st = begin_exchange(c, a, mine, input.data, input.bytes(), &cell);
  if (!st.ok()) return st;
  for (int q = 0; q < p; ++q) {
    const Buffer& o = outputs[static_cast<size_t>(q)];
    if (q == me) {
      if (o.data != input.data && o.bytes()) std::memcpy(o.data, input.data, o.bytes());
      continue;
    }
    st = await_post(c, a, q, cell, mine, a.arrivals());
    if (!st.ok()) return st;
    if (o.bytes()) std::memcpy(o.data, a.post(q, cell), o.bytes());
  }
  end_exchange(a, cell);
  return Status::ok_status();
}

// reduce_own_block sets `out` (n elements) to this rank's block of every
// rank's input reduced in rank order (so that the bits do not depend on
// which rank reduces): rank q's block at block_of(q), this rank's own at
// `own`, its input, which therefore never goes through shared memory.
// Where `out` overlaps `own` (in place, or partly), the rank sets its own
// block aside first, unless it is rank 0 exactly in place: rank 0's block,
// written first, would overwrite it. The other ranks' blocks of this
// rank's input were copied into shared memory before, so `out` may overlap
// them.
template <class BlockOf>
void reduce_own_block(DType dtype, ReduceOp::Kind op, uint8_t* out, const uint8_t* own, size_t n, int p,
                      int me, BlockOf block_of) {
  if (n == 0) return;
  const size_t bytes = n * dtype_size(dtype);
  thread_local std::vector<uint8_t> aside;  // kept: a fresh large one is mapped and faulted in every time
  const bool overlap = out < own + bytes && own < out + bytes;
  if (overlap && !(me == 0 && out == own)) {
    aside.assign(own, own + bytes);
    own = aside.data();
  }
  if (me == 0) {
    if (out != own) std::memcpy(out, own, bytes);
  } else {
    std::memcpy(out, block_of(0), bytes);
  }
  for (int q = 1; q < p; ++q) reduce_into(dtype, op, out, q == me ? own : block_of(q), n);
}

// post_reduce_scatter: every rank posts its blocks for the others, each at
// its place in the row of all blocks (every rank's block d has rank d's
// output length, so the offsets agree; its own block's place stays empty),
// and reduces its own block of everyone's in rank order.
Status post_reduce_scatter(AlgoContext& c, shm::HostSlots& a, const Buffer& output,
                           const std::vector<Buffer>& inputs, ReduceOp::Kind op, size_t most) {
  const int p = a.local_size(), me = a.local_index();
  const size_t es = dtype_size(output.dtype);
  const auto mine = op_stamp(c, Collective::kReduceScatter, -1, most * es);
  int cell;
  Status st = next_post(c, a, true, &cell);
  if (!st.ok()) return st;
  size_t at = 0, mine_at = 0;
  uint8_t* post = a.post(me, cell);
  for (int d = 0; d < p; ++d) {
    const Buffer& in = inputs[static_cast<size_t>(d)];
    if (d == me) mine_at = at;
    if (d != me && in.bytes()) std::memcpy(post + at, in.data, in.bytes());  // its own block stays home
    at += in.bytes();
  }
  publish_post(a, cell, mine, nullptr, 0);
  a.arrive();
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    st = await_post(c, a, q, cell, mine, a.arrivals());
    if (!st.ok()) return st;
  }
  reduce_own_block(output.dtype, op, static_cast<uint8_t*>(output.data),
                   static_cast<const uint8_t*>(inputs[static_cast<size_t>(me)].data), output.count, p, me,
                   [&](int q) { return a.post(q, cell) + mine_at; });
  end_exchange(a, cell);
  return Status::ok_status();
}

// read_broadcast: every rank but the root reads the root's buffer in place.
Status read_broadcast(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, int root,
                      const shm::HostSlots::Stamp& mine) {
  int half;
  Status st = begin_single_copy(c, a, mine, buf.data, &half);
  if (st.ok() && a.local_index() != root) {
    st = read_peer(c, a, root, buf.data, a.stamp_of(root, half).word, buf.bytes());
  }
  if (!st.ok()) return st;
  return end_single_copy(c, a, half);
}

}  // namespace

Status shm_broadcast(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, int root) {
  const ShmWay way = way_of(c, a, Collective::kBroadcast, buf.bytes());
  if (way == ShmWay::kPosts) {
    note_way(c, Collective::kBroadcast, "through the posts");
    return post_broadcast(c, a, buf, root);
  }
  const int me = a.local_index();
  auto* data = static_cast<uint8_t*>(buf.data);
  const size_t bytes = buf.bytes();
  auto mine = op_stamp(c, Collective::kBroadcast, root, bytes);
  if (way == ShmWay::kInPlace) {
    note_way(c, Collective::kBroadcast, "reading the root's buffer in place");
    return read_broadcast(c, a, buf, root, mine);
  }
  note_way(c, Collective::kBroadcast, "through the slots");
  for (size_t off = 0; off == 0 || off < bytes; off += a.slot_bytes()) {
    const size_t n = std::min(a.slot_bytes(), bytes - off);
    int half;
    Status st = next_half(c, a, me == root, &half);
    if (!st.ok()) return st;
    if (me == root) {
      // Only the root stamps: it alone writes, and only it is read.
      if (off == 0) a.stamp(half, mine);
      if (n) std::memcpy(a.slot(root, half), data + off, n);
    } else {
      st = wait_until(c, a, root, a.arrivals() + 1);
      if (st.ok() && off == 0) st = check_stamps(a, root, half, mine, c.what);
      if (!st.ok()) return st;
      if (n) std::memcpy(data + off, a.slot(root, half), n);
    }
    a.arrive();
    release(a, half, a.arrivals());  // every reader read before arriving
  }
  return Status::ok_status();
}

Status shm_all_gather(AlgoContext& c, shm::HostSlots& a, const Buffer& input,
                      const std::vector<Buffer>& outputs) {
  const int p = a.local_size(), me = a.local_index();
  size_t most = 0;
  for (const Buffer& o : outputs) most = std::max(most, o.bytes());
  const ShmWay way = way_of(c, a, Collective::kAllGather, most);
  if (way == ShmWay::kPosts) {
    note_way(c, Collective::kAllGather, "through the posts");
    return post_all_gather(c, a, input, outputs, most);
  }
  const auto* in = static_cast<const uint8_t*>(input.data);
  auto mine = op_stamp(c, Collective::kAllGather, -1, most);
  if (way == ShmWay::kInPlace) {
    note_way(c, Collective::kAllGather, "reading the others' buffers in place");
    int half;
    Status st = begin_single_copy(c, a, mine, input.data, &half);
    if (!st.ok()) return st;
    for (int q = 0; q < p && st.ok(); ++q) {
      const Buffer& o = outputs[static_cast<size_t>(q)];
      if (q != me) {
        st = read_peer(c, a, q, o.data, a.stamp_of(q, half).word, o.bytes());
      } else if (o.data != input.data && o.bytes()) {
        std::memcpy(o.data, input.data, o.bytes());
      }
    }
    if (!st.ok()) return st;
    return end_single_copy(c, a, half);
  }
  // A rank whose input lies in symmetric memory publishes where, in place
  // of its first chunk, and the others copy all of it at once from their
  // own mapping of it: one copy instead of two, and no chunk of it goes
  // through the slots.
  const shm::SymmetricRegistry::Place place =
      input.bytes() ? symmetric_place(a, input) : shm::SymmetricRegistry::Place{};
  note_way(c, Collective::kAllGather,
           place.id ? "through the slots, this rank's input read from its symmetric memory"
                    : "through the slots");
  std::vector<char> in_place(static_cast<size_t>(p), 0);  // whose input the others read in place
  bool any_in_place = false;
  for (size_t off = 0; off == 0 || off < most; off += a.slot_bytes()) {
    auto part = [&](size_t total) { return off >= total ? 0 : std::min(a.slot_bytes(), total - off); };
    int half;
    Status st = next_half(c, a, true, &half);
    if (!st.ok()) return st;
    if (off == 0) {
      mine.word = place.id ? kSlotHoldsPlace : 0;
      a.stamp(half, mine);
    }
    if (off == 0 && place.id) {
      std::memcpy(a.slot(me, half), &place, sizeof place);
    } else if (!place.id && part(input.bytes())) {
      std::memcpy(a.slot(me, half), in + off, part(input.bytes()));
    }
    a.arrive();
    // This rank's own part while the others publish theirs, and from its
    // input: copied from its slot, whose lines the others are reading, the
    // 2-rank all_gather of 128 KiB per rank took 9.6-10.4 us against
    // 5.2-5.4 (2026-11-27, alternating builds).
    uint8_t* own = static_cast<uint8_t*>(outputs[static_cast<size_t>(me)].data);
    if (!place.id && own != input.data && part(input.bytes())) {
      std::memcpy(own + off, in + off,
                  std::min(part(input.bytes()), part(outputs[static_cast<size_t>(me)].bytes())));
    }
    st = wait_until(c, a, -1, a.arrivals());
    if (st.ok() && off == 0) st = check_stamps(a, -1, half, mine, c.what);
    if (!st.ok()) return st;
    for (int q = 0; q < p; ++q) {
      const Buffer& o = outputs[static_cast<size_t>(q)];
      if (off == 0) {
        in_place[static_cast<size_t>(q)] = a.stamp_of(q, half).word == kSlotHoldsPlace;
        any_in_place = any_in_place || in_place[static_cast<size_t>(q)];
      }
      if (q == me && (o.data == input.data || !place.id)) continue;  // in place, or copied above
      if (in_place[static_cast<size_t>(q)]) {
        if (off == 0 && o.bytes()) {
          st = q == me ? (std::memcpy(o.data, input.data, o.bytes()), Status::ok_status())
                       : read_symmetric(c, a, q, half, o);
          if (!st.ok()) return st;
        }
        continue;
      }
      if (part(o.bytes())) std::memcpy(static_cast<uint8_t*>(o.data) + off, a.slot(q, half), part(o.bytes()));
    }
    release(a, half, a.arrivals() + 1);
  }
  // No rank may change an input the others read in place until they have.
  if (any_in_place) return arrive_and_wait_all(c, a);
  return Status::ok_status();
}

Status shm_reduce_scatter(AlgoContext& c, shm::HostSlots& a, const Buffer& output,
                          const std::vector<Buffer>& inputs, ReduceOp::Kind op) {
  const int p = a.local_size(), me = a.local_index();
  const size_t es = dtype_size(output.dtype);
  size_t most = 0;
  for (const Buffer& b : inputs) most = std::max(most, b.count);
  if (way_of(c, a, Collective::kReduceScatter, most * es * static_cast<size_t>(p)) == ShmWay::kPosts) {
    note_way(c, Collective::kReduceScatter, "through the posts");
    return post_reduce_scatter(c, a, output, inputs, op, most);
  }
  note_way(c, Collective::kReduceScatter,
           c.way == ShmWay::kByRule && most * es * static_cast<size_t>(p) <= shm::HostSlots::kPostBytes
               ? "through the slots: its blocks fit the posts, but this host's ranks outnumber their CPUs"
               : "through the slots");
  // Each chunk carries `per_block` elements of every other destination's
  // block (its own block's place stays empty).
  const size_t per_block = std::max<size_t>(1, a.slot_bytes() / (static_cast<size_t>(p) * es));
  const auto mine = op_stamp(c, Collective::kReduceScatter, -1, most * es);
  for (size_t e0 = 0; e0 == 0 || e0 < most; e0 += per_block) {
    auto part = [&](size_t count) { return e0 >= count ? 0 : std::min(per_block, count - e0); };
    int half;
    Status st = next_half(c, a, true, &half);
    if (!st.ok()) return st;
    if (e0 == 0) a.stamp(half, mine);
    for (int d = 0; d < p; ++d) {
      const Buffer& in = inputs[static_cast<size_t>(d)];
      const size_t n = part(in.count);
      if (n && d != me) {  // its own block stays home
        std::memcpy(a.slot(me, half) + static_cast<size_t>(d) * per_block * es,
                    static_cast<const uint8_t*>(in.data) + e0 * es, n * es);
      }
    }
    st = arrive_and_wait_all(c, a);
    if (st.ok() && e0 == 0) st = check_stamps(a, -1, half, mine, c.what);
    if (!st.ok()) return st;
    const size_t at = static_cast<size_t>(me) * per_block * es;
    reduce_own_block(output.dtype, op, static_cast<uint8_t*>(output.data) + e0 * es,
                     static_cast<const uint8_t*>(inputs[static_cast<size_t>(me)].data) + e0 * es,
                     part(output.count), p, me, [&](int q) { return a.slot(q, half) + at; });
    release(a, half, a.arrivals() + 1);
  }
  return Status::ok_status();
}

}  // namespace cohort
