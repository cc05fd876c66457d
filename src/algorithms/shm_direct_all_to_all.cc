// shm_direct_all_to_all.cc: all_to_all among the ranks of one host,
// through the slots: each slot holds a table of this rank's split sizes and
// one block per destination, and the ranks check that their sizes pair up.
// Small blocks of one size go through the posts instead, once the ranks
// know they all have such blocks (post_all_to_all).
// The shared helpers are in shm_direct_internal.h.
#include "algorithms/shm_direct.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/shm_direct_internal.h"

namespace cohort {
namespace {

using namespace shm_direct_internal;  // NOLINT: the helpers of every direct collective

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
      auto name = [&](int local) {
        return "rank " + std::to_string(a.local_ranks()[static_cast<size_t>(local)]);
      };
      return Status(StatusCode::kDesync, name(q) + " sends " + std::to_string(sent) + " bytes to " + name(d) +
                                             ", which expects " + std::to_string(expected) + " from it in " +
                                             what + ": the ranks' split sizes disagree");
    }
  }
  return Status::ok_status();
}

// apart says whether no block of `inputs` shares a byte with a block of
// `outputs` (p x p comparisons: against the copies they decide about,
// nothing).
bool apart(const std::vector<Buffer>& inputs, const std::vector<Buffer>& outputs) {
  for (const Buffer& in : inputs) {
    const auto* in_at = static_cast<const uint8_t*>(in.data);
    for (const Buffer& out : outputs) {
      const auto* out_at = static_cast<const uint8_t*>(out.data);
      if (in.bytes() && out.bytes() && in_at < out_at + out.bytes() && out_at < in_at + in.bytes()) {
        return false;
      }
    }
  }
  return true;
}

// read_in_place: every rank published its blocks' addresses (at `table`
// in its slot `half`) and all have one size: each reads its block from
// every peer's input.
Status read_in_place(AlgoContext& c, shm::HostSlots& a, const std::vector<Buffer>& outputs, int half,
                     size_t table) {
  const int p = a.local_size(), me = a.local_index();
  Status st;
  for (int q = 0; q < p && st.ok(); ++q) {
    const Buffer& out = outputs[static_cast<size_t>(q)];
    if (q == me || out.bytes() == 0) continue;
    uint64_t theirs;
    std::memcpy(&theirs, a.slot(q, half) + table + static_cast<size_t>(me) * sizeof theirs, sizeof theirs);
    st = read_peer(c, a, q, out.data, theirs, out.bytes());
  }
  if (!st.ok()) return st;
  return end_single_copy(c, a, half);
}

// post_all_to_all tries a small all_to_all through the posts: each rank
// posts its blocks for the others, stamped with their size (kNoFit when
// they are not all of one size or do not fit in a post), and reads its
// block from each peer's post. Whether it can is known only once every
// rank's stamp is in: if any rank's blocks are not of this rank's one
// size, *done is false and the call goes through the slots after all (so
// ranks try the posts only after an all_to_all that fitted everywhere,
// and a change of sizes costs that one round once).
Status post_all_to_all(AlgoContext& c, shm::HostSlots& a, const std::vector<Buffer>& outputs,
                       const std::vector<Buffer>& inputs, bool* done) {
  constexpr uint64_t kNoFit = ~uint64_t{0};
  const int p = a.local_size(), me = a.local_index();
  *done = false;
  uint64_t block = inputs.empty() ? kNoFit : inputs.front().bytes();
  for (size_t q = 0; q < inputs.size(); ++q) {
    if (inputs[q].bytes() != block || outputs[q].bytes() != block) block = kNoFit;
  }
  if (block != kNoFit && block > shm::HostSlots::kPostBytes / static_cast<size_t>(p)) block = kNoFit;
  const auto mine = op_stamp(c, Collective::kAllToAll, -1, block);
  int cell;
  Status st = next_post(c, a, true, &cell);
  if (!st.ok()) return st;
  if (block != kNoFit && block != 0) {  // empty blocks may have no data pointer at all
    uint8_t* post = a.post(me, cell);
    for (int d = 0; d < p; ++d) {
      if (d != me) std::memcpy(post + static_cast<size_t>(d) * block, inputs[static_cast<size_t>(d)].data, block);
    }
  }
  a.stamp_post(cell, mine);
  a.arrive();
  bool all_fit = block != kNoFit;
  for (int q = 0; q < p && st.ok(); ++q) {
    if (q == me) continue;
    st = await_post(c, a, q, cell, mine, a.arrivals(), /*same_bytes=*/false);
    all_fit = all_fit && a.post_stamp_of(q, cell).bytes == block;
  }
  if (!st.ok()) return st;
  if (all_fit) {
    const Buffer& own_out = outputs[static_cast<size_t>(me)];
    const Buffer& own_in = inputs[static_cast<size_t>(me)];
    if (block && own_out.data != own_in.data) std::memmove(own_out.data, own_in.data, block);
    for (int q = 0; q < p; ++q) {
      if (q != me && block) {
        std::memcpy(outputs[static_cast<size_t>(q)].data, a.post(q, cell) + static_cast<size_t>(me) * block,
                    block);
      }
    }
  }
  end_exchange(a, cell);
  a.post_clock().all_to_all_in_posts = all_fit;
  *done = all_fit;
  return Status::ok_status();
}

}  // namespace

bool shm_all_to_all_fits(const shm::HostSlots& a) {
  return a.slot_bytes() / static_cast<size_t>(a.local_size()) >= 2 * 64 + 2 * sizeof(uint64_t);
}

Status shm_all_to_all(AlgoContext& c, shm::HostSlots& a, const std::vector<Buffer>& outputs,
                      const std::vector<Buffer>& inputs) {
  // Through the posts only where each rank has a core (yielding ranks
  // take turns on a core, and the posts were slower there for
  // reduce_scatter), and only after an all_to_all that fitted everywhere.
  if (a.post_clock().all_to_all_in_posts && !a.oversubscribed()) {
    bool done = false;
    Status st = post_all_to_all(c, a, outputs, inputs, &done);
    if (st.ok() && done) {
      note_way(c, Collective::kAllToAll, "through the posts (blocks of one size that fit a post)");
    }
    if (!st.ok() || done) return st;
  } else if (a.post_clock().all_to_all_in_posts) {
    note_way(c, Collective::kAllToAll,
             "through the slots: its blocks fit the posts, but this host's ranks outnumber their CPUs");
  }
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
  // A rank whose blocks are all of one size, large enough, offers to have
  // them read in place: its slot then holds their addresses, not their
  // first chunk. Only if every rank offers the same size do they read in
  // place; otherwise those that offered publish their first chunk after
  // all (every rank sees who did, so all arrive once more for it).
  // In place (input and output one tensor), it may not: it would write its
  // outputs while the others still read its inputs there.
  // The offer is the stamp word's top bit (no block is 2^63 bytes), so
  // that ranks with blocks of one size agree only if all offer.
  constexpr uint64_t kOffersInPlace = uint64_t{1} << 63;
  const bool offers = mine.word != kUneven && shm_rules::all_to_all_offers_in_place(shm_call_facts(a, mine.word)) &&
                      apart(inputs, outputs);
  if (offers) mine.word |= kOffersInPlace;
  auto offered = [&](int q, int half) {
    const uint64_t w = a.stamp_of(q, half).word;
    return w != kUneven && (w & kOffersInPlace);
  };
  auto copy_own = [&](size_t from, size_t n) {
    const Buffer& own_out = outputs[static_cast<size_t>(me)];
    const auto* own_in = static_cast<const uint8_t*>(inputs[static_cast<size_t>(me)].data) + from;
    if (n && own_in != static_cast<uint8_t*>(own_out.data) + from) {
      std::memcpy(static_cast<uint8_t*>(own_out.data) + from, own_in, n);
    }
  };
  size_t most = 0;  // the largest block any rank sends: known after the first chunk
  for (size_t off = 0; off == 0 || off < most; off += per_block) {
    auto part = [&](const Buffer& b) { return off >= b.bytes() ? 0 : std::min(per_block, b.bytes() - off); };
    auto publish = [&](uint8_t* slot) {
      for (int d = 0; d < p; ++d) {
        const Buffer& in = inputs[static_cast<size_t>(d)];
        if (d != me && part(in)) {
          std::memcpy(slot + table + static_cast<size_t>(d) * per_block,
                      static_cast<const uint8_t*>(in.data) + off, part(in));
        }
      }
    };
    const size_t own_n =
        std::min(part(outputs[static_cast<size_t>(me)]), part(inputs[static_cast<size_t>(me)]));
    int half;
    Status st = next_half(c, a, true, &half);
    if (!st.ok()) return st;
    uint8_t* slot = a.slot(me, half);
    const bool addresses_in_slot = off == 0 && offers;
    if (off == 0) {
      a.stamp(half, mine);
      for (int q = 0; q < p; ++q) {
        const uint64_t sends = inputs[static_cast<size_t>(q)].bytes(),
                       expects = outputs[static_cast<size_t>(q)].bytes();
        std::memcpy(slot + static_cast<size_t>(q) * sizeof sends, &sends, sizeof sends);
        std::memcpy(slot + static_cast<size_t>(p + q) * sizeof expects, &expects, sizeof expects);
        if (addresses_in_slot) {
          const uint64_t at = reinterpret_cast<uint64_t>(inputs[static_cast<size_t>(q)].data);
          std::memcpy(slot + table + static_cast<size_t>(q) * sizeof at, &at, sizeof at);
        }
      }
    }
    if (!addresses_in_slot) publish(slot);
    a.arrive();
    // This rank's own block while the others publish theirs.
    copy_own(off, own_n);
    st = wait_until(c, a, -1, a.arrivals());
    if (st.ok() && off == 0) st = check_stamps(a, -1, half, mine, c.what);
    if (!st.ok()) return st;
    if (off == 0) {
      bool uniform = mine.word != kUneven;
      for (int q = 0; q < p && uniform; ++q) uniform = a.stamp_of(q, half).word == mine.word;
      // Every rank saw every rank's word: all agree whether the next all_to_all tries the posts.
      a.post_clock().all_to_all_in_posts =
          uniform && mine.word <= shm::HostSlots::kPostBytes / static_cast<size_t>(p);
      if (uniform && offers) {
        copy_own(own_n, (mine.word & ~kOffersInPlace) - own_n);  // the rest of this rank's own block
        note_way(c, Collective::kAllToAll, "reading the others' buffers in place");
        return read_in_place(c, a, outputs, half, table);
      }
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
      bool any_offered = false;
      for (int q = 0; q < p; ++q) any_offered = any_offered || offered(q, half);
      if (any_offered) {
        if (addresses_in_slot) publish(slot);
        st = arrive_and_wait_all(c, a);
        if (!st.ok()) return st;
      }
    }
    for (int q = 0; q < p; ++q) {
      const Buffer& out = outputs[static_cast<size_t>(q)];
      const size_t n = part(out);
      if (n == 0 || q == me) continue;  // this rank's own: copied above
      std::memcpy(static_cast<uint8_t*>(out.data) + off,
                  a.slot(q, half) + table + static_cast<size_t>(me) * per_block, n);
    }
    release(a, half, a.arrivals() + 1);
  }
  note_way(c, Collective::kAllToAll, "through the slots");
  return Status::ok_status();
}

}  // namespace cohort
