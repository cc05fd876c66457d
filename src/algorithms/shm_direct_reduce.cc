// shm_direct_reduce.cc: all_reduce (of one buffer or of several pieces)
// and reduce among the ranks of one host: in a word carried by the stamp,
// in one step through the posts (up to a post, 16 KiB: every rank reduces
// the whole vector in rank order, so that all get identical bits), chunk by
// chunk through the slots with each rank reducing its own block, or
// straight between buffers that lie in symmetric memory. The shared
// helpers are in shm_direct_internal.h.
#include "algorithms/shm_direct.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "algorithms/shm_direct_internal.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {
using namespace shm_direct_internal;  // NOLINT: the helpers of every direct collective

// Piece is one of the buffers whose concatenation an all_reduce reduces
// (all_reduce_coalesced: several; all_reduce: one): where it is here, how
// many elements it holds, and, when it lies in a symmetric allocation
// (transport/shm/symmetric.h), which one and where, so that the ranks
// holding that allocation can reach it through their own mapping.
struct Piece {
  uint64_t address;
  uint64_t count;
  uint64_t symmetric_id = 0;  // 0: ordinary memory
  uint64_t symmetric_offset = 0;
};

// for_each_run calls f(piece, address, elements, offset) for each part of
// the elements [first, first + n) of the concatenation of `pieces`, in
// order; `piece` indexes `pieces`, `offset` counts elements from `first`.
template <class F>
void for_each_run(const std::vector<Piece>& pieces, size_t es, size_t first, size_t n, F f) {
  size_t start = 0, done = 0;  // where the current piece starts; elements handed out
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (done == n) return;
    const size_t end = start + p.count;
    if (end > first + done) {
      const size_t from = first + done - start;
      const size_t take = std::min<size_t>(end - (first + done), n - done);
      f(i, p.address + from * es, take, done);
      done += take;
    }
    start = end;
  }
}

// pack_into copies elements [first, first + n) of this rank's pieces to
// `to`; unpack_from copies them back from `from`.
void pack_into(uint8_t* to, const std::vector<Piece>& pieces, size_t es, size_t first, size_t n) {
  for_each_run(pieces, es, first, n, [&](size_t, uint64_t at, size_t k, size_t off) {
    std::memcpy(to + off * es, reinterpret_cast<const void*>(at), k * es);
  });
}
void unpack_from(const uint8_t* from, const std::vector<Piece>& pieces, size_t es, size_t first, size_t n) {
  for_each_run(pieces, es, first, n, [&](size_t, uint64_t at, size_t k, size_t off) {
    std::memcpy(reinterpret_cast<void*>(at), from + off * es, k * es);
  });
}

// A rank whose first slot of an all_reduce holds its table of pieces
// (every piece in symmetric memory) instead of its first chunk of data
// says so with this in its stamp's word (no buffer lives at 1).
constexpr uint64_t kSlotHoldsTable = 1;

// symmetric_table is this rank's table of pieces as the others read it
// (length, then the pieces), or empty when a piece lies in ordinary memory
// or the table does not fit in a slot: then the data goes through slots.
std::vector<uint64_t> symmetric_table(const shm::HostSlots& a, std::vector<Piece>& pieces, size_t es) {
  const shm::SymmetricRegistry& registry = *a.symmetric();
  if (registry.empty()) return {};
  std::vector<uint64_t> table{pieces.size()};
  for (Piece& piece : pieces) {
    const auto place =
        registry.place_of(a.local_index(), reinterpret_cast<const void*>(piece.address), piece.count * es);
    if (place.id == 0) return {};
    piece.symmetric_id = place.id;
    piece.symmetric_offset = place.offset;
    table.insert(table.end(), {piece.address, piece.count, piece.symmetric_id, piece.symmetric_offset});
  }
  if (table.size() * sizeof table[0] > a.slot_bytes()) return {};
  return table;
}

// same_symmetric_places says whether local rank q's table (in its slot
// `half`) puts every piece at the same allocation, offset and length as
// this rank's: the case of one bucket in symmetric memory.
bool same_symmetric_places(const shm::HostSlots& a, int q, int half, const std::vector<Piece>& mine) {
  const uint8_t* slot = a.slot(q, half);
  uint64_t n = 0;
  std::memcpy(&n, slot, sizeof n);
  if (n != mine.size()) return false;
  for (size_t i = 0; i < mine.size(); ++i) {
    Piece theirs;
    std::memcpy(&theirs, slot + sizeof n + i * sizeof(Piece), sizeof theirs);
    if (theirs.count != mine[i].count || theirs.symmetric_id != mine[i].symmetric_id ||
        theirs.symmetric_offset != mine[i].symmetric_offset) {
      return false;
    }
  }
  return true;
}

// Symmetric memory: the block of the reduction each rank owns is reduced
// and written out in chunks of this size, so that it is still in cache
// when it is copied into the others' pieces.
constexpr size_t kSymmetricChunkBytes = 256 * 1024;

// Between chunks, a rank reducing in symmetric memory looks for a dead peer
// after every this many bytes of its block: it waits for no one until its
// block is done, and a large block under a sanitizer takes seconds.
constexpr size_t kSymmetricCheckBytes = 4 * 1024 * 1024;

// all_reduce_symmetric runs once every rank has published, in its slot
// `half`, a table that puts its pieces at the same places of the same
// symmetric allocations. Each rank reduces its own block straight from the
// others' pieces, through its own mapping of them, and writes the reduced,
// scaled block into every rank's pieces while it is in cache: no system
// call, no copy through a slot and no second pass.
Status all_reduce_symmetric(AlgoContext& c, shm::HostSlots& a, const std::vector<Piece>& mine, size_t total,
                            DType dtype, ReduceOp::Kind op, double post_scale, int half) {
  const int p = a.local_size(), me = a.local_index();
  const size_t es = dtype_size(dtype);
  const shm::SymmetricRegistry& registry = *a.symmetric();
  // theirs[q][i]: local rank q's piece i as mapped here. This rank holds
  // every allocation its own pieces are in, so each is found; `holds` keeps
  // the mappings for the op even if their owners free them meanwhile.
  std::vector<std::vector<uint8_t*>> theirs(static_cast<size_t>(p));
  std::vector<std::shared_ptr<ShmSegment>> holds;
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    for (const Piece& piece : mine) {
      std::shared_ptr<ShmSegment> hold;
      uint8_t* at =
          registry.region_of(q, piece.symmetric_id, piece.symmetric_offset, piece.count * es, &hold);
      if (!at) {
        return Status(StatusCode::kBackendError, "symmetric allocation " +
                                                     std::to_string(piece.symmetric_id) +
                                                     " vanished from the registry during " + c.what);
      }
      theirs[static_cast<size_t>(q)].push_back(at);
      holds.push_back(std::move(hold));
    }
  }
  size_t lo, len;
  block_range(total, p, me, &lo, &len);
  const size_t chunk = std::max<size_t>(1, kSymmetricChunkBytes / es);
  const size_t check_every = kSymmetricCheckBytes / (chunk * es);
  for (size_t e = 0, chunks = 0; e < len; e += chunk) {
    const size_t n = std::min(chunk, len - e);
    if (++chunks % check_every == 0) {
      // The others arrive at the end only once done writing into this
      // rank's pieces; one that left before that will never be.
      Status st = check_peers(c, a, -1, a.arrivals() + 1);
      if (!st.ok()) return st;
    }
    // The pieces are at the same places on every rank, so a run of this
    // rank's piece i is at the same distance into everyone's piece i.
    for_each_run(mine, es, lo + e, n, [&](size_t i, uint64_t at, size_t k, size_t) {
      auto* own = reinterpret_cast<uint8_t*>(at);
      const size_t into = static_cast<size_t>(at - mine[i].address);
      for (int q = 0; q < p; ++q) {
        if (q != me) reduce_into(dtype, op, own, theirs[static_cast<size_t>(q)][i] + into, k);
      }
      if (post_scale != 1.0) scale(dtype, own, k, post_scale);
      for (int q = 0; q < p; ++q) {
        if (q != me) std::memcpy(theirs[static_cast<size_t>(q)][i] + into, own, k * es);
      }
    });
  }
  // Every rank stays until all have written into its pieces.
  return end_single_copy(c, a, half);
}

// reduce_chunks reduces the concatenation of `pieces` (this rank's; other
// ranks may cut the same total differently) through the slots, chunk by
// chunk: each rank copies its chunk into its slot, reduces its own block
// of every rank's chunk (scaled by `post_scale` while in cache), and
// copies the reduced blocks out; to every rank (root < 0) or to local rank
// `root` only. In an all_reduce a rank's own block never goes through its
// slot on the way in: it is reduced in the rank's buffer, where it ends,
// and copied to the slot for the others, which saves one copy of a block
// per chunk (a quarter of the copying at 2 ranks). In an all_reduce whose
// pieces all lie in symmetric memory the first slot carries the rank's
// table instead: if every rank's table is the same, all_reduce_symmetric
// takes over.
Status reduce_chunks(AlgoContext& c, shm::HostSlots& a, std::vector<Piece> pieces, DType dtype,
                     ReduceOp::Kind op, int root, double post_scale) {
  const int p = a.local_size(), me = a.local_index();
  const size_t es = dtype_size(dtype);
  size_t total = 0;
  for (const Piece& piece : pieces) total += piece.count;
  const size_t chunk = std::max<size_t>(1, a.slot_bytes() / es);
  auto mine = op_stamp(c, root < 0 ? Collective::kAllReduce : Collective::kReduce, root, total * es);
  const std::vector<uint64_t> table = root < 0 ? symmetric_table(a, pieces, es) : std::vector<uint64_t>{};
  // At least one chunk, so that ranks that disagree about an empty buffer
  // still meet and find out.
  for (size_t off = 0; off == 0 || off < total; off += chunk) {
    const size_t n = std::min(chunk, total - off);
    if (off == 0) note_way(c, root < 0 ? Collective::kAllReduce : Collective::kReduce, "through the slots");
    size_t lo, len;  // this rank's block of the chunk
    block_range(n, p, me, &lo, &len);
    int half;
    Status st = next_half(c, a, true, &half);
    if (!st.ok()) return st;
    uint8_t* own_slot = a.slot(me, half);
    // What the others read of this rank's chunk: all of it for a reduce,
    // the others' blocks for an all_reduce.
    auto publish_chunk = [&] {
      if (root >= 0) return pack_into(own_slot, pieces, es, off, n);
      pack_into(own_slot, pieces, es, off, lo);
      pack_into(own_slot + (lo + len) * es, pieces, es, off + lo + len, n - lo - len);
    };
    if (off == 0) {
      mine.word = table.empty() ? 0 : kSlotHoldsTable;
      a.stamp(half, mine);
    }
    if (off == 0 && !table.empty()) {
      std::memcpy(own_slot, table.data(), table.size() * sizeof table[0]);
    } else {
      publish_chunk();
    }
    st = arrive_and_wait_all(c, a);
    if (st.ok() && off == 0) st = check_stamps(a, -1, half, mine, c.what);
    if (!st.ok()) return st;
    if (off == 0) {
      int tables = 0;
      bool same = !table.empty();
      for (int q = 0; q < p; ++q) {
        if (a.stamp_of(q, half).word != kSlotHoldsTable) continue;
        ++tables;
        if (q != me) same = same && same_symmetric_places(a, q, half, pieces);
      }
      if (tables == p && same) {
        note_way(c, Collective::kAllReduce, "straight from every rank's symmetric memory");
        return all_reduce_symmetric(c, a, pieces, total, dtype, op, post_scale, half);
      }
      if (tables > 0) {
        // Not all alike: the ranks that published a table put their chunk
        // in its place once everyone has read the tables, and all go on
        // through the slots. Every rank sees the same stamps and tables,
        // so all arrive the same number of times.
        st = arrive_and_wait_all(c, a);
        if (st.ok() && !table.empty()) publish_chunk();
        if (st.ok()) st = arrive_and_wait_all(c, a);
        if (!st.ok()) return st;
      }
    }
    if (root < 0) {
      // In place in this rank's buffer, in the same order as a slot would
      // be (own data first, then the others by rank), then out to the slot.
      for_each_run(pieces, es, off + lo, len, [&](size_t, uint64_t at, size_t k, size_t o) {
        auto* own = reinterpret_cast<uint8_t*>(at);
        for (int q = 0; q < p; ++q) {
          if (q != me) reduce_into(dtype, op, own, a.slot(q, half) + (lo + o) * es, k);
        }
        if (post_scale != 1.0) scale(dtype, own, k, post_scale);  // while the block is in cache
      });
      pack_into(own_slot + lo * es, pieces, es, off + lo, len);
    } else {
      uint8_t* own = own_slot + lo * es;
      for (int q = 0; q < p; ++q) {
        if (q != me && len) reduce_into(dtype, op, own, a.slot(q, half) + lo * es, len);
      }
      if (post_scale != 1.0 && len) scale(dtype, own, len, post_scale);
    }
    st = arrive_and_wait_all(c, a);
    if (!st.ok()) return st;
    if (root < 0 || root == me) {
      for (int q = 0; q < p; ++q) {
        if (q == me && root < 0) continue;  // already in place
        size_t q_lo, q_len;
        block_range(n, p, q, &q_lo, &q_len);
        if (q_len) unpack_from(a.slot(q, half) + q_lo * es, pieces, es, off + q_lo, q_len);
      }
    }
    release(a, half, a.arrivals() + 1);
  }
  return Status::ok_status();
}

std::vector<Piece> pieces_of(const std::vector<Buffer>& buffers) {
  std::vector<Piece> pieces;
  pieces.reserve(buffers.size());
  for (const Buffer& b : buffers) pieces.push_back(Piece{reinterpret_cast<uint64_t>(b.data), b.count});
  return pieces;
}

// post_reduce: the others post and go on; the root reduces their posts in
// rank order, its own data first (as reduce_chunks does).
Status post_reduce(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, int root, ReduceOp::Kind op) {
  const int p = a.local_size(), me = a.local_index();
  const auto mine = op_stamp(c, Collective::kReduce, root, buf.bytes());
  int cell;
  Status st = next_post(c, a, me != root, &cell);
  if (!st.ok()) return st;
  if (me != root) {
    publish_post(a, cell, mine, buf.data, buf.bytes());
  } else {
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      st = await_post(c, a, q, cell, mine, one_way_arrival(a));
      if (!st.ok()) return st;
      if (buf.count) reduce_into(buf.dtype, op, buf.data, a.post(q, cell), buf.count);
    }
  }
  end_one_way(a, cell);
  return Status::ok_status();
}

// reduce_in_rank_order sets `buf`, this rank's data, to every rank's data
// reduced in rank order (so that every rank gets identical bits: x op y is
// not always y op x, bit for bit, with NaNs and signed zeros), reading
// rank q's at data_of(q) and this rank's own from a copy of `buf`, not from
// where the others read it: reading lines the others are reading was
// slower than a copy of its own (2 ranks, alternating builds, 2026-11-27:
// 4 KiB through the posts 0.38-0.40 us against 0.57, 16 KiB through the
// slots 0.93-1.01 against 1.41-1.43). (A reduce_scatter's own block never
// goes through shared memory: shm_direct_gather_scatter.cc.)
template <class DataOf>
void reduce_in_rank_order(const Buffer& buf, ReduceOp::Kind op, int p, int me, DataOf data_of) {
  if (buf.count == 0) return;
  thread_local std::vector<uint8_t> own;  // kept: a fresh large one is mapped and faulted in every time
  if (me > 0)
    own.assign(static_cast<const uint8_t*>(buf.data), static_cast<const uint8_t*>(buf.data) + buf.bytes());
  for (int q = 0; q < p; ++q) {
    if (q == 0 && me > 0) {
      std::memcpy(buf.data, data_of(q), buf.bytes());
    } else if (q > 0) {
      reduce_into(buf.dtype, op, buf.data, q == me ? own.data() : data_of(q), buf.count);
    }
  }
}

// post_all_reduce: every rank posts its vector, then reduces everyone's
// posts in rank order, in one step.
Status post_all_reduce(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, ReduceOp::Kind op,
                       double post_scale) {
  const int p = a.local_size(), me = a.local_index();
  const auto mine = op_stamp(c, Collective::kAllReduce, -1, buf.bytes());
  int cell;
  Status st = begin_exchange(c, a, mine, buf.data, buf.bytes(), &cell);
  if (!st.ok()) return st;
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    st = await_post(c, a, q, cell, mine, a.arrivals());
    if (!st.ok()) return st;
  }
  reduce_in_rank_order(buf, op, p, me, [&](int q) { return a.post(q, cell); });
  end_exchange(a, cell);
  if (post_scale != 1.0) scale(buf.dtype, buf.data, buf.count, post_scale);
  return Status::ok_status();
}

}  // namespace

bool shm_all_reduce_takes_pieces(size_t bytes) {
  // all_reduce's rule reads the size alone: every rank takes the same path.
  return shm_way_by_rule(Collective::kAllReduce, ShmCallFacts{bytes}) == ShmWay::kSlots;
}

Status shm_all_reduce_pieces(AlgoContext& c, shm::HostSlots& a, const std::vector<Buffer>& buffers,
                             ReduceOp::Kind op, double post_scale) {
  return reduce_chunks(c, a, pieces_of(buffers), buffers.front().dtype, op, -1, post_scale);
}

Status shm_all_reduce(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, ReduceOp::Kind op,
                      double post_scale) {
  const size_t bytes = buf.bytes();
  const ShmWay way = way_of(c, a, Collective::kAllReduce, bytes);
  if (way == ShmWay::kSlots) {
    return reduce_chunks(c, a, pieces_of({buf}), buf.dtype, op, -1, post_scale);
  }
  if (way == ShmWay::kPosts) {
    note_way(c, Collective::kAllReduce, "through the posts");
    return post_all_reduce(c, a, buf, op, post_scale);
  }
  note_way(c, Collective::kAllReduce, "in the stamps (a word at most)");
  // Up to a word: the data travels in the stamp, on the line of the rank's
  // arrival count, so a peer gets count, stamp and data in one cache miss,
  // and no slot line changes hands.
  const int p = a.local_size(), me = a.local_index();
  auto mine = op_stamp(c, Collective::kAllReduce, -1, bytes);
  int half;
  Status st = next_half(c, a, true, &half);
  if (!st.ok()) return st;
  std::memcpy(&mine.word, buf.data, bytes);
  a.stamp(half, mine);
  st = arrive_and_wait_all(c, a);
  if (!st.ok()) return st;
  // Each peer's line is read once, for its stamp and its data together:
  // read again later, it may already hold the peer's next operation.
  for (int q = 0; q < p; ++q) {
    const shm::HostSlots::Stamp theirs = q == me ? mine : a.stamp_of(q, half);
    if (q != me) st = check_stamp(a, q, theirs, mine, c.what);
    if (!st.ok()) return st;
    if (q == 0) {
      std::memcpy(buf.data, &theirs.word, bytes);
    } else {
      reduce_into(buf.dtype, op, buf.data, &theirs.word, buf.count);
    }
  }
  release(a, half, a.arrivals() + 1);
  if (post_scale != 1.0) scale(buf.dtype, buf.data, buf.count, post_scale);
  return Status::ok_status();
}

Status shm_reduce(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, int root, ReduceOp::Kind op) {
  if (way_of(c, a, Collective::kReduce, buf.bytes()) == ShmWay::kPosts) {
    note_way(c, Collective::kReduce, "through the posts");
    return post_reduce(c, a, buf, root, op);
  }
  return reduce_chunks(c, a, pieces_of({buf}), buf.dtype, op, root, 1.0);
}

}  // namespace cohort
