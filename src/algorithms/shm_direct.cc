#include "algorithms/shm_direct.h"

#include <algorithm>
#include <cstring>

#include "common/spin.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

// check_peers takes in what the peers sent and fails if one of the local
// ranks named by `who` (-1: every one) closed its connection before having
// arrived `target` times: it will not come, since its process exited or it
// destroyed its group.
Status check_peers(AlgoContext& c, shm::HostSlots& a, int who, uint64_t target) {
  Transport& t = c.transport;
  Status st = t.poll_health();
  if (!st.ok()) return st;
  for (int q = 0; q < a.local_size(); ++q) {
    const int rank = a.local_ranks()[static_cast<size_t>(q)];
    if ((who < 0 || q == who) && q != a.local_index() && a.arrivals_of(q) < target && t.peer_gone(rank)) {
      return network_error(t.peer_name(rank) + " closed its connection before reaching " + c.what +
                           " (its process exited, or it destroyed the group)");
    }
  }
  return Status::ok_status();
}

// wait_until returns once local rank `who` (-1: every local rank) has
// arrived `target` times; a dead peer, abort() or the deadline end it.
Status wait_until_slow(AlgoContext& c, shm::HostSlots& a, int who, uint64_t target);
inline Status wait_until(AlgoContext& c, shm::HostSlots& a, int who, uint64_t target) {
  // Often there is nothing to wait for: then no service is built.
  if (a.arrived(who, target)) return Status::ok_status();
  return wait_until_slow(c, a, who, target);
}

Status wait_until_slow(AlgoContext& c, shm::HostSlots& a, int who, uint64_t target) {
  // What the service below needs, captured by one reference so that the
  // std::function holding it fits in place (no allocation per wait).
  struct Wait {
    AlgoContext& c;
    shm::HostSlots& a;
    int who;
    uint64_t target;
  } w{c, a, who, target};
  // While waiting, keep this rank's point-to-point requests moving (a peer
  // may need one to get here) and, between sleeps, notice a dead peer.
  return a.wait_for(
      who, target, c.deadline,
      [&w](bool deep, bool* busy) {
        Transport& t = w.c.transport;
        if (t.has_pending()) t.progress(Deadline::at(Clock::now()));
        *busy = t.has_pending();
        if (!deep) return Status::ok_status();
        return check_peers(w.c, w.a, w.who, w.target);
      },
      c.what);
}

// next_half picks the slot half of the next chunk and, for a rank about to
// write into it, waits until its previous readers are done.
Status next_half(AlgoContext& c, shm::HostSlots& a, bool writes, int* half) {
  auto& clock = a.slot_clock();
  *half = static_cast<int>(clock.chunks++ & 1);
  if (!writes) return Status::ok_status();
  return wait_until(c, a, -1, clock.free_after[*half]);
}

// release records that the readers of `half` are done once every rank has
// arrived `after` times.
inline void release(shm::HostSlots& a, int half, uint64_t after) {
  a.slot_clock().free_after[half] = after;
}

// Arrive, then wait for everyone to have arrived as often.
Status arrive_and_wait_all(AlgoContext& c, shm::HostSlots& a) {
  a.arrive();
  return wait_until(c, a, -1, a.arrivals());
}

// op_stamp names an operation for the desync check.
shm::HostSlots::Stamp op_stamp(const AlgoContext& c, Collective collective, int root, uint64_t bytes) {
  return shm::HostSlots::Stamp{
      c.sequence, bytes, static_cast<uint32_t>(collective) << 16 | static_cast<uint32_t>(root & 0xFFFF)};
}

std::string describe(const shm::HostSlots::Stamp& s) {
  std::string text =
      std::string(collective_name(static_cast<Collective>(s.op >> 16))) + " #" + std::to_string(s.sequence);
  const int root = static_cast<int16_t>(s.op & 0xFFFF);
  if (root >= 0) text += " (root " + std::to_string(root) + ")";
  return text;
}

// check_stamp compares `theirs`, what local rank `q` runs, with `mine`.
Status stamps_differ(const shm::HostSlots& a, int q, shm::HostSlots::Stamp theirs,
                     const shm::HostSlots::Stamp& mine, const std::string& what);
inline Status check_stamp(const shm::HostSlots& a, int q, const shm::HostSlots::Stamp& theirs,
                          const shm::HostSlots::Stamp& mine, const std::string& what) {
  if (theirs.sequence == mine.sequence && theirs.op == mine.op && theirs.bytes == mine.bytes) {
    return Status::ok_status();
  }
  return stamps_differ(a, q, theirs, mine, what);
}

// stamps_differ says how `theirs` differs from `mine`. When `theirs` is
// of another operation, the stamp local rank q wrote for this rank's
// operation, if any, tells more: a rank that broadcasts through its posts
// leaves its slot halves' stamps as they were, and the reverse.
Status stamps_differ(const shm::HostSlots& a, int q, shm::HostSlots::Stamp theirs,
                     const shm::HostSlots::Stamp& mine, const std::string& what) {
  for (int i = 0; i < 2 + shm::HostSlots::kPosts && theirs.sequence != mine.sequence; ++i) {
    const auto other = i < 2 ? a.stamp_of(q, i) : a.post_stamp_of(q, i - 2);
    if (other.sequence == mine.sequence) theirs = other;
  }
  const std::string peer = "rank " + std::to_string(a.local_ranks()[static_cast<size_t>(q)]);
  if (theirs.sequence != mine.sequence || theirs.op != mine.op) {
    return Status(StatusCode::kDesync, peer + " is in " + describe(theirs) + " while this rank is in " +
                                           what +
                                           ": the ranks called different collectives (or in another order)");
  }
  return Status(StatusCode::kDesync, peer + " called " + describe(theirs) + " with " +
                                         std::to_string(theirs.bytes) + " bytes but this rank with " +
                                         std::to_string(mine.bytes) + " in " + what +
                                         ": sizes differ between ranks");
}

// check_stamps compares what local rank `who` (-1: every one) runs in
// `half` with this rank's `mine`, after waiting for their arrival there.
Status check_stamps(shm::HostSlots& a, int who, int half, const shm::HostSlots::Stamp& mine,
                    const std::string& what) {
  for (int q = 0; q < a.local_size(); ++q) {
    if ((who >= 0 && q != who) || q == a.local_index()) continue;
    Status st = check_stamp(a, q, a.stamp_of(q, half), mine, what);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

// Up to this many bytes, all_reduce takes one step: every rank reduces the
// whole vector from every slot (in rank order, so that all get identical
// bits); beyond it, the work is split by blocks.
constexpr size_t kOneStepBytes = 16 * 1024;

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

// end_single_copy keeps every rank in the op until all are done with the
// others' buffers (read them, or written into them), which each caller may
// change as soon as it returns.
Status end_single_copy(AlgoContext& c, shm::HostSlots& a, int half) {
  Status st = arrive_and_wait_all(c, a);
  release(a, half, a.arrivals());
  return st;
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
    return invalid_argument("rank " + std::to_string(a.local_ranks()[static_cast<size_t>(q)]) + "'s input to " +
                            c.what + " lies in symmetric allocation #" + std::to_string(theirs.id) +
                            ", which this rank does not hold (freed, or never allocated here): allocate and "
                            "free symmetric memory on every rank of the group alike");
  }
  std::memcpy(out.data, at, out.bytes());
  return Status::ok_status();
}

// reads_in_place says whether an all_gather of `bytes` per rank reads the
// other ranks' buffers in place (process_vm_readv) instead of through the
// slots. Measured here (2026-11-25, P=2 and 4 on 2 cores, 512 KiB slots):
// the kernel's copy, which pins the peer's pages, wins only for all_gather
// at 2 ranks from 256 KiB to 2 MiB per rank (by 10-15%); from 4 MiB per
// rank the slots win by up to 1.5x, broadcast and all_reduce through the
// slots are 2-4x faster than it, and with more ranks than cores everything
// is.
bool reads_in_place(const shm::HostSlots& a, size_t bytes) {
  const size_t from = a.single_copy_from();
  return !a.oversubscribed() && from != SIZE_MAX && bytes >= from && bytes < 8 * from;
}

// read_peer reads from local rank `q`'s buffer; when that fails (the peer
// left the operation), the reason it left, which it sent before leaving,
// is the better error.
Status read_peer(AlgoContext& c, shm::HostSlots& a, int q, void* into, uint64_t address, size_t bytes) {
  Status st = a.read_from(q, into, address, bytes);
  if (st.ok() && a.left(q, c.sequence)) {
    // It gave up before we were done: what we read may already be freed.
    st = network_error("rank " + std::to_string(a.local_ranks()[static_cast<size_t>(q)]) + " left " + c.what +
                       " while this rank was reading its buffer");
  }
  if (st.ok()) return st;
  Status why = c.transport.poll_health();
  return why.ok() ? st : why;
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

// Posts (host_slots.h): each rank's ring of kPosts small cells. An
// operation of up to kPostBytes per rank takes the next cell index on every
// rank (the clock counts alike everywhere); a rank writes its part into its
// own cell and goes on; those that need it read it once it is there. A
// rank waits for readers only to reuse a cell, kPosts operations later, so
// a writer may run far ahead (Open MPI's eager sends let it do the same).

// next_post takes the next cell index; a rank about to write into its cell
// waits until that cell's readers of kPosts operations ago are done.
Status next_post(AlgoContext& c, shm::HostSlots& a, bool writes, int* cell) {
  auto& clock = a.post_clock();
  *cell = static_cast<int>(clock.posts++ % shm::HostSlots::kPosts);
  if (!writes) return Status::ok_status();
  return wait_until(c, a, -1, clock.free_after[*cell]);
}

// publish_post writes `bytes` of `data` into this rank's cell, then its
// stamp: a reader that sees the stamp sees the data.
void publish_post(shm::HostSlots& a, int cell, const shm::HostSlots::Stamp& mine, const void* data,
                  size_t bytes) {
  if (bytes) std::memcpy(a.post(a.local_index(), cell), data, bytes);
  a.stamp_post(cell, mine);
}

// await_post returns once local rank q's cell holds its part of `mine`'s
// operation, checked against `mine`: once q has `arrivals` arrivals, the
// count it reaches by arriving after it posted. A writer ahead of this
// rank has stamped the cell already: then its count, a cache line it
// keeps writing, is not read at all.
Status await_post(AlgoContext& c, shm::HostSlots& a, int q, int cell, const shm::HostSlots::Stamp& mine,
                  uint64_t arrivals) {
  auto theirs = a.post_stamp_of(q, cell);
  // A peer about to post (the usual case in an exchange, where all post at
  // once) is watched on its cell's line, which then brings stamp and data
  // in one miss; through its count that takes two. Briefly, and only with
  // a core per rank: else the peer may need this one.
  for (int i = 0; i < 2048 && theirs.sequence != mine.sequence && !a.oversubscribed(); ++i) {
    cpu_relax();
    theirs = a.post_stamp_of(q, cell);
  }
  if (theirs.sequence != mine.sequence) {
    Status st = wait_until(c, a, q, arrivals);
    if (!st.ok()) return st;
    theirs = a.post_stamp_of(q, cell);
  }
  return check_stamp(a, q, theirs, mine, c.what);
}

// One-way operations (broadcast, reduce): the writers post and arrive; the
// readers arrive once they have read, so the cell is free again once
// every rank has arrived as often as this rank has now.
// Exchanges (all_gather, reduce_scatter): every rank posts, arrives, then
// reads the others' posts; its arrival says only that its post is there.
// Each has read this operation's posts once it arrives in the next one,
// so the cell is free after one more arrival of every rank (as a slot half
// is, release()).
uint64_t one_way_arrival(shm::HostSlots& a) {
  return a.arrivals() + 1;
}
void end_one_way(shm::HostSlots& a, int cell) {
  a.arrive();
  a.post_clock().free_after[cell] = a.arrivals();
}
void end_exchange(shm::HostSlots& a, int cell) {
  a.post_clock().free_after[cell] = a.arrivals() + 1;
}

// begin_exchange takes this rank's next cell, posts `bytes` of `data` in
// it, stamped, and arrives: from then on the others may read it.
Status begin_exchange(AlgoContext& c, shm::HostSlots& a, const shm::HostSlots::Stamp& mine, const void* data,
                      size_t bytes, int* cell) {
  Status st = next_post(c, a, true, cell);
  if (!st.ok()) return st;
  publish_post(a, *cell, mine, data, bytes);
  a.arrive();
  return Status::ok_status();
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

// post_all_gather: every rank posts its input and reads everyone's post.
// Up to 40 bytes a post shares its stamp's cache line: one miss per peer.
Status post_all_gather(AlgoContext& c, shm::HostSlots& a, const Buffer& input, const std::vector<Buffer>& outputs,
                       size_t most) {
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

// A reduce_scatter goes through the posts only up to 1 KiB in all: at 2
// ranks, 4 KiB in all took 1.11-1.16 us through the posts against
// 0.92-1.01 through the slots (2026-11-27, alternating builds).
constexpr size_t kPostReduceScatterBytes = 1024;

// post_reduce_scatter: every rank posts all its blocks, one after another
// (every rank's block d has rank d's output length, so the offsets agree),
// and reduces its own block of everyone's post in rank order.
Status post_reduce_scatter(AlgoContext& c, shm::HostSlots& a, const Buffer& output,
                           const std::vector<Buffer>& inputs, ReduceOp::Kind op, size_t most) {
  const int p = a.local_size(), me = a.local_index();
  const size_t es = dtype_size(output.dtype);
  const auto mine = op_stamp(c, Collective::kReduceScatter, -1, most * es);
  int cell;
  Status st = next_post(c, a, true, &cell);
  if (!st.ok()) return st;
  size_t at = 0, mine_at = 0;
  uint8_t* own = a.post(me, cell);
  for (int d = 0; d < p; ++d) {
    const Buffer& in = inputs[static_cast<size_t>(d)];
    if (d == me) mine_at = at;
    if (in.bytes()) std::memcpy(own + at, in.data, in.bytes());
    at += in.bytes();
  }
  publish_post(a, cell, mine, nullptr, 0);
  a.arrive();
  for (int q = 0; q < p; ++q) {
    if (q != me) {
      st = await_post(c, a, q, cell, mine, a.arrivals());
      if (!st.ok()) return st;
    }
    if (output.count == 0) continue;
    // This rank's own block from its post too: the output may be that
    // block of its input (in place), overwritten by rank 0's first.
    const uint8_t* block = a.post(q, cell) + mine_at;
    if (q == 0) {
      if (block != output.data) std::memcpy(output.data, block, output.bytes());
    } else {
      reduce_into(output.dtype, op, output.data, block, output.count);
    }
  }
  end_exchange(a, cell);
  return Status::ok_status();
}

// reduce_in_rank_order sets `buf`, this rank's data, to every rank's data
// reduced in rank order (so that every rank gets identical bits: x op y is
// not always y op x, bit for bit, with NaNs and signed zeros), reading
// rank q's at data_of(q) and this rank's own from a copy of `buf`, not from
// where the others read it: reading lines the others are reading was
// slower than a copy of its own (2 ranks, alternating builds, 2026-11-27:
// 4 KiB through the posts 0.38-0.40 us against 0.57, 16 KiB through the
// slots 0.93-1.01 against 1.41-1.43). Not so in a reduce_scatter, where
// the others read other blocks of a rank's slot than its own.
template <class DataOf>
void reduce_in_rank_order(const Buffer& buf, ReduceOp::Kind op, int p, int me, DataOf data_of) {
  if (buf.count == 0) return;
  thread_local std::vector<uint8_t> own;  // kept: a fresh large one is mapped and faulted in every time
  if (me > 0) own.assign(static_cast<const uint8_t*>(buf.data), static_cast<const uint8_t*>(buf.data) + buf.bytes());
  for (int q = 0; q < p; ++q) {
    if (q == 0 && me > 0) {
      std::memcpy(buf.data, data_of(q), buf.bytes());
    } else if (q > 0) {
      reduce_into(buf.dtype, op, buf.data, q == me ? own.data() : data_of(q), buf.count);
    }
  }
}

// post_all_reduce: every rank posts its vector, then reduces everyone's
// posts in rank order, as the one-step path through the slots does.
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
  return bytes > kOneStepBytes;
}

Status shm_all_reduce_pieces(AlgoContext& c, shm::HostSlots& a, const std::vector<Buffer>& buffers,
                             ReduceOp::Kind op, double post_scale) {
  return reduce_chunks(c, a, pieces_of(buffers), buffers.front().dtype, op, -1, post_scale);
}

Status shm_all_reduce(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, ReduceOp::Kind op,
                      double post_scale) {
  const size_t bytes = buf.bytes();
  if (shm_all_reduce_takes_pieces(bytes) || bytes > a.slot_bytes()) {
    return reduce_chunks(c, a, pieces_of({buf}), buf.dtype, op, -1, post_scale);
  }
  // Over a word and up to a post: through the posts, where a rank need not
  // wait for a slot half that its peers may still be reading (at 2 ranks,
  // 4 KiB: 0.52-0.55 us against 0.58-0.60 through the slots).
  if (bytes > sizeof(uint64_t) && bytes <= shm::HostSlots::kPostBytes) {
    return post_all_reduce(c, a, buf, op, post_scale);
  }
  const int p = a.local_size(), me = a.local_index();
  auto mine = op_stamp(c, Collective::kAllReduce, -1, bytes);
  int half;
  Status st = next_half(c, a, true, &half);
  if (!st.ok()) return st;
  if (bytes <= sizeof mine.word) {
    // Up to a word: the data travels in the stamp, on the line of the
    // rank's arrival count, so a peer gets count, stamp and data in one
    // cache miss, and no slot line changes hands.
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
  a.stamp(half, mine);
  if (bytes) std::memcpy(a.slot(me, half), buf.data, bytes);
  st = arrive_and_wait_all(c, a);
  if (st.ok()) st = check_stamps(a, -1, half, mine, c.what);
  if (!st.ok()) return st;
  reduce_in_rank_order(buf, op, p, me, [&](int q) { return a.slot(q, half); });
  release(a, half, a.arrivals() + 1);
  if (post_scale != 1.0) scale(buf.dtype, buf.data, buf.count, post_scale);
  return Status::ok_status();
}

Status shm_reduce(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, int root, ReduceOp::Kind op) {
  if (buf.bytes() <= shm::HostSlots::kPostBytes) return post_reduce(c, a, buf, root, op);
  return reduce_chunks(c, a, pieces_of({buf}), buf.dtype, op, root, 1.0);
}

Status shm_broadcast(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, int root) {
  if (buf.bytes() <= shm::HostSlots::kPostBytes) return post_broadcast(c, a, buf, root);
  const int me = a.local_index();
  auto* data = static_cast<uint8_t*>(buf.data);
  const size_t bytes = buf.bytes();
  auto mine = op_stamp(c, Collective::kBroadcast, root, bytes);
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
  if (most <= shm::HostSlots::kPostBytes) return post_all_gather(c, a, input, outputs, most);
  const auto* in = static_cast<const uint8_t*>(input.data);
  auto mine = op_stamp(c, Collective::kAllGather, -1, most);
  if (reads_in_place(a, most)) {
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
      std::memcpy(own + off, in + off, std::min(part(input.bytes()), part(outputs[static_cast<size_t>(me)].bytes())));
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
  if (most * es * static_cast<size_t>(p) <= kPostReduceScatterBytes) {
    return post_reduce_scatter(c, a, output, inputs, op, most);
  }
  // Each chunk carries `per_block` elements of every destination's block.
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
      if (n) {
        std::memcpy(a.slot(me, half) + static_cast<size_t>(d) * per_block * es,
                    static_cast<const uint8_t*>(in.data) + e0 * es, n * es);
      }
    }
    st = arrive_and_wait_all(c, a);
    if (st.ok() && e0 == 0) st = check_stamps(a, -1, half, mine, c.what);
    if (!st.ok()) return st;
    const size_t n = part(output.count);
    if (n) {
      uint8_t* out = static_cast<uint8_t*>(output.data) + e0 * es;
      const size_t at = static_cast<size_t>(me) * per_block * es;
      std::memcpy(out, a.slot(0, half) + at, n * es);
      for (int q = 1; q < p; ++q) reduce_into(output.dtype, op, out, a.slot(q, half) + at, n);
    }
    release(a, half, a.arrivals() + 1);
  }
  return Status::ok_status();
}

namespace {

// split_mismatch names the first (sender, receiver) pair whose sizes
// disagree in the tables of the ranks' slots (`half`, first chunk), or
// returns ok. Every rank reads the same tables, so all fail alike.
Status split_mismatch(const shm::HostSlots& a, int half, const std::string& what) {
  const int p = a.local_size();
  auto entry = [&](int q, int i) {
    uint64_t v;
    std::memcpy(&v, a.slot(q, half) + static_cast<size_t>(i) * sizeof v, sizeof v);
    return v;
  };
  for (int q = 0; q < p; ++q) {
    for (int d = 0; d < p; ++d) {
      const uint64_t sent = entry(q, d), expected = entry(d, p + q);
      if (sent == expected) continue;
      auto name = [&](int local) { return "rank " + std::to_string(a.local_ranks()[static_cast<size_t>(local)]); };
      return Status(StatusCode::kDesync, name(q) + " sends " + std::to_string(sent) + " bytes to " + name(d) +
                                             ", which expects " + std::to_string(expected) + " from it in " +
                                             what + ": the ranks' split sizes disagree");
    }
  }
  return Status::ok_status();
}

}  // namespace

bool shm_all_to_all_fits(const shm::HostSlots& a) {
  return a.slot_bytes() / static_cast<size_t>(a.local_size()) >= 2 * 64 + 2 * sizeof(uint64_t);
}

Status shm_all_to_all(AlgoContext& c, shm::HostSlots& a, const std::vector<Buffer>& outputs,
                      const std::vector<Buffer>& inputs) {
  const int p = a.local_size(), me = a.local_index();
  // A slot: a table (what this rank sends to each rank, then what it
  // expects from each) and one block per destination.
  const size_t table = (2 * static_cast<size_t>(p) * sizeof(uint64_t) + 63) / 64 * 64;
  const size_t per_block = (a.slot_bytes() - table) / static_cast<size_t>(p) / 64 * 64;
  // Split sizes may differ between ranks, so the size is in the tables,
  // which every rank checks, not in the stamp. The stamp's word says
  // whether all of this rank's blocks, in and out, have one size: when
  // every rank's says the same size, the tables (a cache line of each
  // rank's, which changed hands) need not be read.
  constexpr uint64_t kUneven = ~uint64_t{0};
  auto mine = op_stamp(c, Collective::kAllToAll, -1, 0);
  mine.word = inputs.empty() ? kUneven : inputs.front().bytes();
  for (size_t q = 0; q < inputs.size(); ++q) {
    if (inputs[q].bytes() != mine.word || outputs[q].bytes() != mine.word) mine.word = kUneven;
  }
  size_t most = 0;  // the largest block any rank sends: known after the first chunk
  for (size_t off = 0; off == 0 || off < most; off += per_block) {
    auto part = [&](const Buffer& b) { return off >= b.bytes() ? 0 : std::min(per_block, b.bytes() - off); };
    int half;
    Status st = next_half(c, a, true, &half);
    if (!st.ok()) return st;
    uint8_t* slot = a.slot(me, half);
    if (off == 0) {
      a.stamp(half, mine);
      for (int q = 0; q < p; ++q) {
        const uint64_t sends = inputs[static_cast<size_t>(q)].bytes(),
                       expects = outputs[static_cast<size_t>(q)].bytes();
        std::memcpy(slot + static_cast<size_t>(q) * sizeof sends, &sends, sizeof sends);
        std::memcpy(slot + static_cast<size_t>(p + q) * sizeof expects, &expects, sizeof expects);
      }
    }
    for (int d = 0; d < p; ++d) {
      const Buffer& in = inputs[static_cast<size_t>(d)];
      if (d != me && part(in)) {
        std::memcpy(slot + table + static_cast<size_t>(d) * per_block, static_cast<const uint8_t*>(in.data) + off,
                    part(in));
      }
    }
    a.arrive();
    // This rank's own block while the others publish theirs.
    const Buffer& own_out = outputs[static_cast<size_t>(me)];
    const auto* own_in = static_cast<const uint8_t*>(inputs[static_cast<size_t>(me)].data) + off;
    const size_t own_n = std::min(part(own_out), part(inputs[static_cast<size_t>(me)]));
    if (own_n && own_in != static_cast<uint8_t*>(own_out.data) + off) {
      std::memcpy(static_cast<uint8_t*>(own_out.data) + off, own_in, own_n);
    }
    st = wait_until(c, a, -1, a.arrivals());
    if (st.ok() && off == 0) st = check_stamps(a, -1, half, mine, c.what);
    if (!st.ok()) return st;
    if (off == 0) {
      bool uniform = mine.word != kUneven;
      for (int q = 0; q < p && uniform; ++q) uniform = a.stamp_of(q, half).word == mine.word;
      if (uniform) {
        most = mine.word;
      } else {
        st = split_mismatch(a, half, c.what);
        if (!st.ok()) return st;
        for (int q = 0; q < p; ++q) {
          for (int d = 0; d < p; ++d) {
            uint64_t sent;
            std::memcpy(&sent, a.slot(q, half) + static_cast<size_t>(d) * sizeof sent, sizeof sent);
            most = std::max<size_t>(most, sent);
          }
        }
      }
    }
    for (int q = 0; q < p; ++q) {
      const Buffer& out = outputs[static_cast<size_t>(q)];
      const size_t n = part(out);
      if (n == 0 || q == me) continue;  // this rank's own: copied above
      std::memcpy(static_cast<uint8_t*>(out.data) + off, a.slot(q, half) + table + static_cast<size_t>(me) * per_block,
                  n);
    }
    release(a, half, a.arrivals() + 1);
  }
  return Status::ok_status();
}

Status shm_barrier(AlgoContext& c, shm::HostSlots& a) {
  const auto mine = op_stamp(c, Collective::kBarrier, -1, 0);
  int half;
  Status st = next_half(c, a, true, &half);
  if (!st.ok()) return st;
  a.stamp(half, mine);
  st = arrive_and_wait_all(c, a);
  if (st.ok()) st = check_stamps(a, -1, half, mine, c.what);
  release(a, half, a.arrivals() + 1);
  return st;
}

}  // namespace cohort
