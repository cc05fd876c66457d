// all_gather and reduce_scatter on a ring; gather and scatter direct to and
// from the root; all_to_all as pairwise exchanges, all in flight at once;
// the dissemination barrier.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "reduce/reduce.h"

namespace cohort {

Status all_gather(AlgoContext& c, const Buffer& input, const std::vector<Buffer>& outputs) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  if (outputs[r].data != input.data && input.bytes()) std::memcpy(outputs[r].data, input.data, input.bytes());
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const Buffer& out = outputs[(r - s + p) % p];
    const Buffer& in = outputs[(r - s - 1 + 2 * p) % p];
    Status st =
        sendrecv(c, static_cast<uint32_t>(s), right, out.data, out.bytes(), left, in.data, in.bytes());
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

namespace {

// One step of the ring reduce-scatter moves its block in ring segments
// (algorithms.h), every one posted at once, and adds this rank's input to
// each segment as it arrives, while the later ones are still on the wire.
// Unsegmented, the whole block's reduction ran after its last byte arrived
// (2 ranks across hosts on 2 Gbit/s links, 64 MiB: 0.84-0.88 of the link's
// speed).
//
// AddOnArrival: the received segment at received + off is combined with
// own + off, into the received one or (into_own) into own.
struct AddOnArrival {
  DType dtype;
  ReduceOp::Kind op;
  uint8_t* received;
  uint8_t* own;
  bool into_own;
  uint64_t first_tag;
  size_t segment_bytes;
};

bool add_on_arrival(void* context, RecvRequest& r) {
  const auto* a = static_cast<const AddOnArrival*>(context);
  const size_t off = static_cast<size_t>(r.tag - a->first_tag) * a->segment_bytes;
  const size_t count = r.bytes / dtype_size(a->dtype);
  if (a->into_own) {
    reduce_into(a->dtype, a->op, a->own + off, a->received + off, count);
  } else {
    reduce_into(a->dtype, a->op, a->received + off, a->own + off, count);
  }
  return false;  // one segment, one receive
}

// A large all_to_all across hosts paces each TCP stream to its share of
// the host's link, by the bytes it carries, when the link's rate is known
// (COHORT_LINK_GBITS): unpaced, each stream crosses two shaped links, TCP
// shares neither evenly, and links run idle before the last stream ends
// (4 hosts on 2 Gbit/s links, plain TCP: 0.82-0.86 of the link's speed
// unpaced, 0.91-0.95 paced, from 16 MiB). Below a few MiB pacing only
// slows the start.
constexpr size_t kPaceFromBytes = 4 << 20;

class PacedByShare {
 public:
  PacedByShare(Transport& t, const std::vector<size_t>& bytes_to, bool on) : t_(t), on_(on) {
    if (on_) t_.pace_by_share(bytes_to);
  }
  ~PacedByShare() {
    if (on_) t_.pace_by_share({});
  }
  PacedByShare(const PacedByShare&) = delete;
  PacedByShare& operator=(const PacedByShare&) = delete;

 private:
  Transport& t_;
  bool on_;
};

}  // namespace

// Ring reduce-scatter: at step s rank r passes on its running total of
// block (r-s-1) and receives the total of block (r-s-2), adds its own input
// to it, and passes that on next; after P-1 steps block r is complete at
// rank r. Step 0 sends the input block itself; two scratch halves then
// alternate as "sending" and "receiving"; the last step receives into the
// output (or, in place, next to it and adds into it).
Status reduce_scatter(AlgoContext& c, const Buffer& output, const std::vector<Buffer>& inputs,
                      ReduceOp::Kind op) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  if (p == 1) {
    if (output.data != inputs[0].data && output.bytes())
      std::memcpy(output.data, inputs[0].data, output.bytes());
    return Status::ok_status();
  }
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  size_t max_bytes = 0;
  for (const Buffer& b : inputs) max_bytes = std::max(max_bytes, b.bytes());
  const size_t es = dtype_size(output.dtype);
  const size_t seg = ring_segment_bytes(max_bytes, es);
  auto segments = [&](size_t bytes) { return bytes == 0 ? size_t{1} : (bytes + seg - 1) / seg; };
  uint8_t* space = c.scratch_bytes(2 * max_bytes);
  uint8_t* receiving = space;
  const Buffer& first = inputs[(r - 1 + p) % p];
  const uint8_t* sending = static_cast<const uint8_t*>(first.data);
  size_t sending_bytes = first.bytes();
  std::vector<SendRequest> sends;
  std::vector<RecvRequest> recvs;
  for (int s = 0; s < p - 1; ++s) {
    const Buffer& mine = inputs[(r - s - 2 + 2 * p) % p];
    const bool last = s == p - 2;
    const bool in_place = output.data == mine.data;
    uint8_t* into = last && !in_place ? static_cast<uint8_t*>(output.data) : receiving;
    const uint64_t first_tag = ring_segment_tag(c, static_cast<uint32_t>(s), 0);
    AddOnArrival add{mine.dtype,       op,        into, static_cast<uint8_t*>(mine.data),
                     last && in_place, first_tag, seg};
    sends.clear();
    for (size_t k = 0; k < segments(sending_bytes); ++k) {
      const size_t off = k * seg;
      sends.push_back(SendRequest{right, MessageKind::kCollective, first_tag + k, sending + off,
                                  sending_bytes == 0 ? 0 : std::min(seg, sending_bytes - off)});
    }
    recvs.clear();
    for (size_t k = 0; k < segments(mine.bytes()); ++k) {
      const size_t off = k * seg;
      RecvRequest q{left, MessageKind::kCollective, first_tag + k, into + off,
                    mine.bytes() == 0 ? 0 : std::min(seg, mine.bytes() - off)};
      q.on_arrival = add_on_arrival;
      q.context = &add;
      recvs.push_back(q);
    }
    Status st =
        c.transport.exchange(sends.data(), sends.size(), recvs.data(), recvs.size(), c.deadline, c.what);
    if (!st.ok()) return st;
    sending = receiving;
    sending_bytes = mine.bytes();
    receiving = receiving == space ? space + max_bytes : space;
  }
  return Status::ok_status();
}

Status gather(AlgoContext& c, const Buffer& input, const std::vector<Buffer>& outputs, int root) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  if (r != root) return sendrecv(c, 0, root, input.data, input.bytes(), -1, nullptr, 0);
  if (outputs[r].data != input.data && input.bytes()) std::memcpy(outputs[r].data, input.data, input.bytes());
  std::vector<RecvRequest> recvs;
  recvs.reserve(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) {
    if (q != r)
      recvs.push_back(
          RecvRequest{q, MessageKind::kCollective, c.tag(0), outputs[q].data, outputs[q].bytes()});
  }
  return c.transport.exchange(nullptr, 0, recvs.data(), recvs.size(), c.deadline, c.what);
}

Status scatter(AlgoContext& c, const Buffer& output, const std::vector<Buffer>& inputs, int root) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  if (r != root) return sendrecv(c, 0, -1, nullptr, 0, root, output.data, output.bytes());
  if (output.data != inputs[r].data && output.bytes())
    std::memcpy(output.data, inputs[r].data, output.bytes());
  std::vector<SendRequest> sends;
  sends.reserve(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) {
    if (q != r)
      sends.push_back(SendRequest{q, MessageKind::kCollective, c.tag(0), inputs[q].data, inputs[q].bytes()});
  }
  return c.transport.exchange(sends.data(), sends.size(), nullptr, 0, c.deadline, c.what);
}

// Every pair exchanges its blocks directly: rank r sends block t to rank t
// and receives block f from rank f, all in flight at once.
Status all_to_all(AlgoContext& c, const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  if (outputs[r].bytes() && outputs[r].data != inputs[r].data) {
    std::memmove(outputs[r].data, inputs[r].data, outputs[r].bytes());
  }
  // Every pair's exchange at once, not one pair per step: a step waits for
  // its slowest pair (4 hosts on 2 Gbit/s links, 64 MiB: 0.51 of the link's
  // speed one pair a step, 0.87-0.90 all at once). All at once is as fast as
  // plain TCP sockets get there (bench/python/raw_tcp_all_to_all.py: 0.87-0.89
  // however the sender orders its writes).
  std::vector<SendRequest> sends;
  std::vector<RecvRequest> recvs;
  std::vector<size_t> bytes_to(static_cast<size_t>(p), 0);
  size_t sent_bytes = 0;
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    bytes_to[static_cast<size_t>(q)] = inputs[static_cast<size_t>(q)].bytes();
    sent_bytes += bytes_to[static_cast<size_t>(q)];
  }
  PacedByShare pacing(c.transport, bytes_to, sent_bytes >= kPaceFromBytes);
  for (int s = 1; s < p; ++s) {
    const int to = (r + s) % p, from = (r - s + p) % p;
    sends.push_back(SendRequest{to, MessageKind::kCollective, c.tag(0), inputs[to].data, inputs[to].bytes()});
    recvs.push_back(
        RecvRequest{from, MessageKind::kCollective, c.tag(0), outputs[from].data, outputs[from].bytes()});
  }
  return c.transport.exchange(sends.data(), sends.size(), recvs.data(), recvs.size(), c.deadline, c.what);
}

// Dissemination: in round k every rank signals r+2^k and waits for r-2^k;
// after ceil(log2 P) rounds each rank has heard, indirectly, from all.
Status barrier(AlgoContext& c) {
  const int p = c.transport.size();
  const int r = c.transport.rank();
  uint32_t step = 0;
  for (int d = 1; d < p; d <<= 1, ++step) {
    Status st = sendrecv(c, step, (r + d) % p, nullptr, 0, (r - d + p) % p, nullptr, 0);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

}  // namespace cohort
