// shm_direct_all_to_all.cc: all_to_all among the ranks of one host,
// through the slots: each slot holds a table of this rank's split sizes and
// one block per destination, and the ranks check that their sizes pair up.
// The shared helpers are in shm_direct_internal.h.
#include "algorithms/shm_direct.h"

#include <algorithm>
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
        std::memcpy(slot + table + static_cast<size_t>(d) * per_block,
                    static_cast<const uint8_t*>(in.data) + off, part(in));
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
      std::memcpy(static_cast<uint8_t*>(out.data) + off,
                  a.slot(q, half) + table + static_cast<size_t>(me) * per_block, n);
    }
    release(a, half, a.arrivals() + 1);
  }
  return Status::ok_status();
}

}  // namespace cohort
