#include "algorithms/shm_direct.h"

#include <algorithm>
#include <cstring>

#include "reduce/reduce.h"

namespace cohort {
namespace {

// wait_until returns once local rank `who` (-1: every local rank) has
// arrived `target` times; a dead peer, abort() or the deadline end it.
Status wait_until(AlgoContext& c, shm::Arena& a, int who, uint64_t target) {
  // Often there is nothing to wait for: then no service is built.
  if (a.arrived(who, target)) return Status::ok_status();
  // What the service below needs, captured by one reference so that the
  // std::function holding it fits in place (no allocation per wait).
  struct Wait {
    AlgoContext& c;
    shm::Arena& a;
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
        Status st = t.poll_health();
        if (!st.ok()) return st;
        // A peer that closed its connection before arriving will not come:
        // its process exited, or it destroyed its group.
        for (int q = 0; q < w.a.local_size(); ++q) {
          const int rank = w.a.local_ranks()[static_cast<size_t>(q)];
          if ((w.who < 0 || q == w.who) && q != w.a.local_index() && w.a.arrivals_of(q) < w.target &&
              t.peer_gone(rank)) {
            return network_error(t.peer_name(rank) + " closed its connection before reaching " + w.c.what +
                                 " (its process exited, or it destroyed the group)");
          }
        }
        return Status::ok_status();
      },
      c.what);
}

// next_half picks the slot half of the next chunk and, for a rank about to
// write into it, waits until its previous readers are done.
Status next_half(AlgoContext& c, shm::Arena& a, bool writes, int* half) {
  auto& clock = a.slot_clock();
  *half = static_cast<int>(clock.chunks++ & 1);
  if (!writes) return Status::ok_status();
  return wait_until(c, a, -1, clock.free_after[*half]);
}

// release records that the readers of `half` are done once every rank has
// arrived `after` times.
inline void release(shm::Arena& a, int half, uint64_t after) {
  a.slot_clock().free_after[half] = after;
}

// Arrive, then wait for everyone to have arrived as often.
Status arrive_and_wait_all(AlgoContext& c, shm::Arena& a) {
  a.arrive();
  return wait_until(c, a, -1, a.arrivals());
}

// op_stamp names an operation for the desync check.
shm::Arena::Stamp op_stamp(const AlgoContext& c, Collective collective, int root, uint64_t bytes) {
  return shm::Arena::Stamp{c.sequence, bytes,
                           static_cast<uint32_t>(collective) << 16 | static_cast<uint32_t>(root & 0xFFFF)};
}

std::string describe(const shm::Arena::Stamp& s) {
  std::string text =
      std::string(collective_name(static_cast<Collective>(s.op >> 16))) + " #" + std::to_string(s.sequence);
  const int root = static_cast<int16_t>(s.op & 0xFFFF);
  if (root >= 0) text += " (root " + std::to_string(root) + ")";
  return text;
}

// check_stamps compares what local rank `who` (-1: every one) runs in
// `half` with this rank's `mine`, after waiting for their arrival there.
Status check_stamps(shm::Arena& a, int who, int half, const shm::Arena::Stamp& mine,
                    const std::string& what) {
  for (int q = 0; q < a.local_size(); ++q) {
    if ((who >= 0 && q != who) || q == a.local_index()) continue;
    const shm::Arena::Stamp theirs = a.stamp_of(q, half);
    if (theirs.sequence == mine.sequence && theirs.op == mine.op && theirs.bytes == mine.bytes) continue;
    const std::string peer = "rank " + std::to_string(a.local_ranks()[static_cast<size_t>(q)]);
    if (theirs.sequence != mine.sequence || theirs.op != mine.op) {
      return Status(StatusCode::kDesync,
                    peer + " is in " + describe(theirs) + " while this rank is in " + what +
                        ": the ranks called different collectives (or in another order)");
    }
    if (theirs.bytes != mine.bytes) {
      return Status(StatusCode::kDesync, peer + " called " + describe(theirs) + " with " +
                                             std::to_string(theirs.bytes) + " bytes but this rank with " +
                                             std::to_string(mine.bytes) + " in " + what +
                                             ": sizes differ between ranks");
    }
  }
  return Status::ok_status();
}

// Up to this many bytes, all_reduce takes one step: every rank reduces the
// whole vector from every slot (in rank order, so that all get identical
// bits); beyond it, the work is split by blocks.
constexpr size_t kOneStepBytes = 16 * 1024;

// reduce_chunks runs the blocked reduction; the result goes to every rank
// (root < 0) or to local rank `root` only.
Status reduce_chunks(AlgoContext& c, shm::Arena& a, const Buffer& buf, ReduceOp::Kind op, int root,
                     double post_scale) {
  const int p = a.local_size(), me = a.local_index();
  const size_t es = dtype_size(buf.dtype);
  auto* data = static_cast<uint8_t*>(buf.data);
  const size_t chunk = std::max<size_t>(1, a.slot_bytes() / es);
  const auto mine = op_stamp(c, root < 0 ? Collective::kAllReduce : Collective::kReduce, root, buf.bytes());
  // At least one chunk, so that ranks that disagree about an empty buffer
  // still meet and find out.
  for (size_t off = 0; off == 0 || off < buf.count; off += chunk) {
    const size_t n = std::min(chunk, buf.count - off);
    int half;
    Status st = next_half(c, a, true, &half);
    if (!st.ok()) return st;
    if (off == 0) a.stamp(half, mine);
    if (n) std::memcpy(a.slot(me, half), data + off * es, n * es);
    st = arrive_and_wait_all(c, a);
    if (st.ok() && off == 0) st = check_stamps(a, -1, half, mine, c.what);
    if (!st.ok()) return st;
    size_t lo, len;
    block_range(n, p, me, &lo, &len);
    uint8_t* own = a.slot(me, half) + lo * es;
    for (int q = 0; q < p; ++q) {
      if (q != me && len) reduce_into(buf.dtype, op, own, a.slot(q, half) + lo * es, len);
    }
    if (post_scale != 1.0 && len) scale(buf.dtype, own, len, post_scale);  // while the block is in cache
    st = arrive_and_wait_all(c, a);
    if (!st.ok()) return st;
    if (root < 0 || root == me) {
      for (int q = 0; q < p; ++q) {
        block_range(n, p, q, &lo, &len);
        if (len) std::memcpy(data + (off + lo) * es, a.slot(q, half) + lo * es, len * es);
      }
    }
    release(a, half, a.arrivals() + 1);
  }
  return Status::ok_status();
}

// single_copy_at is the size from which a collective reads the other
// ranks' buffers in place. Measured here (bench/compare_shm.sh, P=2 and 4
// on 2 cores): broadcast and all_gather gain from 16 KiB; all_reduce,
// whose slot path keeps its blocks in cache while it reduces, only from
// 256 KiB; and with more ranks than cores, page pinning costs more than the
// second copy until 256 KiB for all of them.
size_t single_copy_at(const shm::Arena& a, bool reduces) {
  const size_t from = a.single_copy_from();
  if (from == SIZE_MAX) return from;
  return reduces || a.oversubscribed() ? from * 16 : from;
}

// read_peer reads from local rank `q`'s buffer; when that fails (the peer
// left the operation), the reason it left, which it sent before leaving,
// is the better error.
Status read_peer(AlgoContext& c, shm::Arena& a, int q, void* into, uint64_t address, size_t bytes) {
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

// Single copy (Arena::single_copy_from): each rank reads the others'
// buffers in place with process_vm_readv, through a scratch chunk small
// enough to stay in cache, so data crosses memory once instead of being
// copied into a slot and out again.
constexpr size_t kReadChunkBytes = 256 * 1024;

// begin_single_copy stamps this rank's op and buffer address, waits until
// every rank has (so their buffers are ready to read), and checks that all
// run the same op. `in_slot` bytes at `buffer`, when given, go into this
// rank's slot instead, read by the others as plain shared memory (no
// system call), and the address stamped is 0.
Status begin_single_copy(AlgoContext& c, shm::Arena& a, shm::Arena::Stamp mine, const void* buffer, int* half,
                         size_t in_slot = 0) {
  mine.address = in_slot ? 0 : reinterpret_cast<uint64_t>(buffer);
  Status st = next_half(c, a, true, half);
  if (!st.ok()) return st;
  if (in_slot) std::memcpy(a.slot(a.local_index(), *half), buffer, in_slot);
  a.stamp(*half, mine);
  st = arrive_and_wait_all(c, a);
  if (st.ok()) st = check_stamps(a, -1, *half, mine, c.what);
  return st;
}

// end_single_copy keeps every rank in the op until all have finished
// reading its buffer, which the caller may change as soon as it returns.
Status end_single_copy(AlgoContext& c, shm::Arena& a, int half) {
  Status st = arrive_and_wait_all(c, a);
  release(a, half, a.arrivals());
  return st;
}

// Piece is one entry of the table a rank publishes for a coalesced
// all_reduce: where one of its buffers is, and how many elements it holds.
// A piece inside a symmetric allocation (transport/shm/symmetric.h) also
// says which one and where, so that the ranks holding it read the piece
// through their own mapping instead of with a system call.
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

// read_table reads local rank q's table of pieces (its length first): from
// its slot `half` when it stamped address 0, else from its memory.
Status read_table(AlgoContext& c, shm::Arena& a, int q, int half, std::vector<Piece>* out) {
  const uint64_t address = a.stamp_of(q, half).address;
  const uint8_t* slot = a.slot(q, half);
  uint64_t n = 0;
  Status st;
  if (address == 0) {
    std::memcpy(&n, slot, sizeof n);
  } else {
    st = read_peer(c, a, q, &n, address, sizeof n);
    if (!st.ok()) return st;
  }
  const uint64_t most = address == 0 ? (a.slot_bytes() - sizeof n) / sizeof(Piece) : uint64_t{1} << 24;
  if (n > most) {
    return Status(StatusCode::kDesync, "rank " + std::to_string(a.local_ranks()[static_cast<size_t>(q)]) +
                                           " published " + std::to_string(n) + " pieces for " + c.what);
  }
  out->resize(n);
  if (n == 0) return st;
  if (address == 0) {
    std::memcpy(out->data(), slot + sizeof n, n * sizeof(Piece));
    return st;
  }
  return read_peer(c, a, q, out->data(), address + sizeof n, n * sizeof(Piece));
}

// PeerPieces is another rank's table of pieces as this rank reads them:
// for each piece, where it is mapped here when it lies in a symmetric
// allocation this rank holds too (null: read it with a system call).
struct PeerPieces {
  std::vector<Piece> pieces;
  std::vector<uint8_t*> mapped;
  bool all_mapped = false;
  std::vector<std::shared_ptr<ShmSegment>> holds;  // keep those mappings for the op

  uint8_t* at(size_t piece, uint64_t address) const {
    return mapped[piece] + (address - pieces[piece].address);
  }
};

// map_pieces finds which of local rank q's pieces this rank maps itself.
void map_pieces(const shm::Arena& a, int q, size_t es, PeerPieces* peer) {
  const shm::SymmetricRegistry& registry = *a.symmetric();
  peer->mapped.assign(peer->pieces.size(), nullptr);
  peer->all_mapped = !peer->pieces.empty();
  for (size_t i = 0; i < peer->pieces.size(); ++i) {
    const Piece& piece = peer->pieces[i];
    std::shared_ptr<ShmSegment> hold;
    if (piece.symmetric_id != 0) {
      peer->mapped[i] = registry.region_of(q, piece.symmetric_id, piece.symmetric_offset, piece.count * es, &hold);
    }
    if (hold) peer->holds.push_back(std::move(hold));
    peer->all_mapped = peer->all_mapped && peer->mapped[i] != nullptr;
  }
}

// left_error is the error for a rank that gave up the operation while this
// one read its memory in place (what was read may be stale).
Status left_error(AlgoContext& c, shm::Arena& a, int q) {
  Status why = c.transport.poll_health();
  if (!why.ok()) return why;
  return network_error("rank " + std::to_string(a.local_ranks()[static_cast<size_t>(q)]) + " left " + c.what +
                       " while this rank was reading its buffer");
}

// all_reduce_pieces_single_copy reduces the concatenation of several
// buffers (a plain all_reduce: one), each in place: every rank publishes a
// table of its pieces, reduces its own block of everyone's (read through
// their tables into a scratch chunk that stays in cache, scaled there by
// `post_scale`), and then copies the others' reduced blocks from their
// pieces straight into its own. Ranks may split the total differently.
// Pieces that both ranks map (symmetric memory) are reduced from and copied
// out of the mapping directly: no system call, no scratch chunk.
Status all_reduce_pieces_single_copy(AlgoContext& c, shm::Arena& a, const std::vector<Buffer>& buffers,
                                     ReduceOp::Kind op, double post_scale) {
  const int p = a.local_size(), me = a.local_index();
  const DType dtype = buffers.front().dtype;
  const size_t es = dtype_size(dtype);
  const shm::SymmetricRegistry& registry = *a.symmetric();
  const bool any_symmetric = !registry.empty();
  std::vector<Piece> mine;
  std::vector<uint64_t> table{buffers.size()};  // what the others read: length, then the pieces
  size_t total = 0;
  for (const Buffer& b : buffers) {
    Piece piece{reinterpret_cast<uint64_t>(b.data), b.count};
    if (any_symmetric) {
      const auto place = registry.place_of(me, b.data, b.bytes());
      piece.symmetric_id = place.id;
      piece.symmetric_offset = place.offset;
    }
    mine.push_back(piece);
    table.insert(table.end(), {piece.address, piece.count, piece.symmetric_id, piece.symmetric_offset});
    total += b.count;
  }
  // The table goes into this rank's slot when it fits (a plain all_reduce's
  // 40 bytes always do): the others read it without a system call.
  const size_t table_bytes = table.size() * sizeof table[0];
  int half;
  Status st = begin_single_copy(c, a, op_stamp(c, Collective::kAllReduce, -1, total * es), table.data(),
                                &half, table_bytes <= a.slot_bytes() ? table_bytes : 0);
  if (!st.ok()) return st;
  std::vector<PeerPieces> theirs(static_cast<size_t>(p));
  for (int q = 0; q < p && st.ok(); ++q) {
    if (q == me) continue;
    st = read_table(c, a, q, half, &theirs[static_cast<size_t>(q)].pieces);
    if (st.ok() && any_symmetric) map_pieces(a, q, es, &theirs[static_cast<size_t>(q)]);
  }
  if (!st.ok()) return st;
  // When every rank's pieces lie at the same places of the same symmetric
  // allocations (a bucket in symmetric memory), each rank writes its reduced
  // block straight into everyone's pieces while the block is in cache: no
  // second pass to copy the others' blocks out, and one barrier fewer. The
  // tables are the same on every rank, so all decide alike.
  bool write_everywhere = mine.front().symmetric_id != 0;
  for (int q = 0; q < p && write_everywhere; ++q) {
    if (q == me) continue;
    const PeerPieces& peer = theirs[static_cast<size_t>(q)];
    write_everywhere = peer.all_mapped && peer.pieces.size() == mine.size();
    for (size_t i = 0; i < mine.size() && write_everywhere; ++i) {
      write_everywhere = peer.pieces[i].symmetric_id == mine[i].symmetric_id &&
                         peer.pieces[i].symmetric_offset == mine[i].symmetric_offset &&
                         peer.pieces[i].count == mine[i].count;
    }
  }
  // Reduce this rank's block of everyone's pieces into its own pieces.
  size_t lo, len;
  block_range(total, p, me, &lo, &len);
  const size_t chunk = std::max<size_t>(1, kReadChunkBytes / es);
  uint8_t* scratch = c.scratch_bytes(chunk * es);
  for (size_t e = 0; e < len; e += chunk) {
    const size_t n = std::min(chunk, len - e);
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      const PeerPieces& peer = theirs[static_cast<size_t>(q)];
      if (peer.all_mapped) {
        for_each_run(mine, es, lo + e, n, [&](size_t, uint64_t into, size_t k, size_t off) {
          for_each_run(peer.pieces, es, lo + e + off, k, [&](size_t i, uint64_t from, size_t k2, size_t off2) {
            reduce_into(dtype, op, reinterpret_cast<uint8_t*>(into) + off2 * es, peer.at(i, from), k2);
          });
        });
        continue;
      }
      for_each_run(peer.pieces, es, lo + e, n, [&](size_t, uint64_t at, size_t k, size_t off) {
        if (st.ok()) st = read_peer(c, a, q, scratch + off * es, at, k * es);
      });
      if (!st.ok()) return st;
      for_each_run(mine, es, lo + e, n, [&](size_t, uint64_t at, size_t k, size_t off) {
        reduce_into(dtype, op, reinterpret_cast<void*>(at), scratch + off * es, k);
      });
    }
    if (post_scale != 1.0) {
      for_each_run(mine, es, lo + e, n, [&](size_t, uint64_t at, size_t k, size_t) {
        scale(dtype, reinterpret_cast<void*>(at), k, post_scale);
      });
    }
    if (write_everywhere) {
      for_each_run(mine, es, lo + e, n, [&](size_t i, uint64_t at, size_t k, size_t) {
        for (int q = 0; q < p; ++q) {
          if (q == me) continue;
          const PeerPieces& peer = theirs[static_cast<size_t>(q)];
          std::memcpy(peer.at(i, peer.pieces[i].address + (at - mine[i].address)),
                      reinterpret_cast<const void*>(at), k * es);
        }
      });
    }
  }
  // Every rank stays until all have written into its pieces.
  if (write_everywhere) return end_single_copy(c, a, half);
  for (int q = 0; q < p; ++q) {
    if (q != me && theirs[static_cast<size_t>(q)].all_mapped && a.left(q, c.sequence)) return left_error(c, a, q);
  }
  st = arrive_and_wait_all(c, a);
  if (!st.ok()) return st;
  // Copy the others' reduced blocks from their pieces straight into ours.
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    const PeerPieces& peer = theirs[static_cast<size_t>(q)];
    block_range(total, p, q, &lo, &len);
    bool read_mapped = false;
    for_each_run(mine, es, lo, len, [&](size_t, uint64_t into, size_t k, size_t off) {
      for_each_run(peer.pieces, es, lo + off, k, [&](size_t i, uint64_t from, size_t k2, size_t off2) {
        uint8_t* to = reinterpret_cast<uint8_t*>(into) + off2 * es;
        if (!peer.mapped.empty() && peer.mapped[i]) {
          std::memcpy(to, peer.at(i, from), k2 * es);
          read_mapped = true;
        } else if (st.ok()) {
          st = read_peer(c, a, q, to, from, k2 * es);
        }
      });
    });
    if (!st.ok()) return st;
    if (read_mapped && a.left(q, c.sequence)) return left_error(c, a, q);
  }
  return end_single_copy(c, a, half);
}

}  // namespace

bool shm_all_reduce_reads_in_place(const shm::Arena& a, size_t bytes, size_t count) {
  return bytes >= single_copy_at(a, true) && count >= static_cast<size_t>(a.local_size());
}

Status shm_all_reduce_pieces(AlgoContext& c, shm::Arena& a, const std::vector<Buffer>& buffers,
                             ReduceOp::Kind op, double post_scale) {
  return all_reduce_pieces_single_copy(c, a, buffers, op, post_scale);
}

Status shm_all_reduce(AlgoContext& c, shm::Arena& a, const Buffer& buf, ReduceOp::Kind op,
                      double post_scale) {
  const size_t bytes = buf.bytes();
  if (shm_all_reduce_reads_in_place(a, bytes, buf.count))
    return all_reduce_pieces_single_copy(c, a, {buf}, op, post_scale);
  if (bytes > kOneStepBytes || bytes > a.slot_bytes()) return reduce_chunks(c, a, buf, op, -1, post_scale);
  const int p = a.local_size(), me = a.local_index();
  const auto mine = op_stamp(c, Collective::kAllReduce, -1, bytes);
  int half;
  Status st = next_half(c, a, true, &half);
  if (!st.ok()) return st;
  a.stamp(half, mine);
  if (bytes) std::memcpy(a.slot(me, half), buf.data, bytes);
  st = arrive_and_wait_all(c, a);
  if (st.ok()) st = check_stamps(a, -1, half, mine, c.what);
  if (!st.ok()) return st;
  if (bytes) std::memcpy(buf.data, a.slot(0, half), bytes);
  for (int q = 1; q < p; ++q) reduce_into(buf.dtype, op, buf.data, a.slot(q, half), buf.count);
  release(a, half, a.arrivals() + 1);
  if (post_scale != 1.0) scale(buf.dtype, buf.data, buf.count, post_scale);
  return Status::ok_status();
}

Status shm_reduce(AlgoContext& c, shm::Arena& a, const Buffer& buf, int root, ReduceOp::Kind op) {
  return reduce_chunks(c, a, buf, op, root, 1.0);
}

Status shm_broadcast(AlgoContext& c, shm::Arena& a, const Buffer& buf, int root) {
  const int me = a.local_index();
  auto* data = static_cast<uint8_t*>(buf.data);
  const size_t bytes = buf.bytes();
  auto mine = op_stamp(c, Collective::kBroadcast, root, bytes);
  if (bytes >= single_copy_at(a, false)) {
    // The others read the root's buffer in place; the root waits until
    // all have, since its caller may change the buffer once it returns.
    int half;
    Status st = next_half(c, a, me == root, &half);
    if (!st.ok()) return st;
    if (me == root) {
      mine.address = reinterpret_cast<uint64_t>(buf.data);
      a.stamp(half, mine);
      a.arrive();
      st = wait_until(c, a, -1, a.arrivals());
    } else {
      st = wait_until(c, a, root, a.arrivals() + 1);
      if (st.ok()) st = check_stamps(a, root, half, mine, c.what);
      if (st.ok()) st = read_peer(c, a, root, buf.data, a.stamp_of(root, half).address, bytes);
      a.arrive();
    }
    release(a, half, a.arrivals());
    return st;
  }
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

Status shm_all_gather(AlgoContext& c, shm::Arena& a, const Buffer& input,
                      const std::vector<Buffer>& outputs) {
  const int p = a.local_size(), me = a.local_index();
  size_t most = 0;
  for (const Buffer& o : outputs) most = std::max(most, o.bytes());
  const auto* in = static_cast<const uint8_t*>(input.data);
  const auto mine = op_stamp(c, Collective::kAllGather, -1, most);
  if (most >= single_copy_at(a, false)) {
    int half;
    Status st = begin_single_copy(c, a, mine, input.data, &half);
    if (!st.ok()) return st;
    for (int q = 0; q < p && st.ok(); ++q) {
      const Buffer& o = outputs[static_cast<size_t>(q)];
      if (q != me) {
        st = read_peer(c, a, q, o.data, a.stamp_of(q, half).address, o.bytes());
      } else if (o.data != input.data && o.bytes()) {
        std::memcpy(o.data, input.data, o.bytes());
      }
    }
    if (!st.ok()) return st;
    return end_single_copy(c, a, half);
  }
  for (size_t off = 0; off == 0 || off < most; off += a.slot_bytes()) {
    auto part = [&](size_t total) { return off >= total ? 0 : std::min(a.slot_bytes(), total - off); };
    int half;
    Status st = next_half(c, a, true, &half);
    if (!st.ok()) return st;
    if (off == 0) a.stamp(half, mine);
    if (part(input.bytes())) std::memcpy(a.slot(me, half), in + off, part(input.bytes()));
    st = arrive_and_wait_all(c, a);
    if (st.ok() && off == 0) st = check_stamps(a, -1, half, mine, c.what);
    if (!st.ok()) return st;
    for (int q = 0; q < p; ++q) {
      const Buffer& o = outputs[static_cast<size_t>(q)];
      if (q == me && o.data == input.data) continue;
      if (part(o.bytes())) std::memcpy(static_cast<uint8_t*>(o.data) + off, a.slot(q, half), part(o.bytes()));
    }
    release(a, half, a.arrivals() + 1);
  }
  return Status::ok_status();
}

Status shm_reduce_scatter(AlgoContext& c, shm::Arena& a, const Buffer& output,
                          const std::vector<Buffer>& inputs, ReduceOp::Kind op) {
  const int p = a.local_size(), me = a.local_index();
  const size_t es = dtype_size(output.dtype);
  size_t most = 0;
  for (const Buffer& b : inputs) most = std::max(most, b.count);
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

Status shm_barrier(AlgoContext& c, shm::Arena& a) {
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
