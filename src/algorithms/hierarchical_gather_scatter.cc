// Hierarchical all_gather and reduce_scatter for a group that spans hosts
// with the same number of ranks on each (FSDP across hosts).
//
// A "column" is the ranks that hold the same local index on every host.
// all_gather: each rank sends its block to the other ranks of its column
// over the network (the columns in parallel), then each host all_gathers
// its columns through shared memory. reduce_scatter runs the same path
// backwards: each host reduce_scatters so that local rank j holds the
// host's sum of the blocks of column j, then each rank sends the other
// ranks of its column their sums and adds up the sums it gets for its own
// block. Either way a host's link carries (H-1)/H of the data once, where
// a flat ring over all ranks crosses it with up to (P-1)/P of it (2 hosts
// x 2 ranks: 2 blocks against 3).
//
// Pipelined: the blocks go in segments, and while the network carries
// segment k (posted requests, which the kernel's socket buffers and the
// shared-memory waits keep moving) the host works on its neighbour
// segment, so the copies through shared memory hide behind the link.
//
// Where hosts hold different numbers of ranks, or the blocks differ in
// size, the flat ring runs instead (every rank sees the same shapes, so
// every rank takes the same path).
#include <algorithm>
#include <cstring>

#include "algorithms/shm_direct.h"
#include "algorithms/sub_transport.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

// HostGrid places every rank of the group: its host and its local index.
struct HostGrid {
  std::vector<int> local;                 // this host's ranks, ascending
  std::vector<std::vector<int>> columns;  // columns[j]: local index j on every host, ascending
  int me_local = -1;                      // this rank's local index
  bool even = true;                       // every host has local.size() ranks
};

HostGrid grid_of(const Transport& t) {
  HostGrid g;
  const int me = t.rank();
  std::vector<std::vector<int>> hosts;  // by leader, ascending
  std::vector<int> host_index(static_cast<size_t>(t.size()), -1);
  for (int q = 0; q < t.size(); ++q) {
    const int leader = t.host_of(q);
    if (host_index[static_cast<size_t>(leader)] < 0) {
      host_index[static_cast<size_t>(leader)] = static_cast<int>(hosts.size());
      hosts.emplace_back();
    }
    hosts[static_cast<size_t>(host_index[static_cast<size_t>(leader)])].push_back(q);
  }
  g.local = hosts[static_cast<size_t>(host_index[static_cast<size_t>(t.host_of(me))])];
  for (const auto& h : hosts) g.even = g.even && h.size() == g.local.size();
  if (!g.even) return g;
  g.me_local = static_cast<int>(std::find(g.local.begin(), g.local.end(), me) - g.local.begin());
  g.columns.resize(g.local.size());
  for (const auto& h : hosts) {
    for (size_t j = 0; j < h.size(); ++j) g.columns[j].push_back(h[j]);
  }
  for (auto& column : g.columns) std::sort(column.begin(), column.end());
  return g;
}

bool same_sizes(const std::vector<Buffer>& buffers) {
  for (const Buffer& b : buffers) {
    if (b.bytes() != buffers.front().bytes()) return false;
  }
  return true;
}

// The host's step runs through shared memory when the slots hold exactly
// this host's ranks in the same order, else as messages among them.
bool slots_fit(const shm::HostSlots* slots, const HostGrid& g) {
  return slots && slots->local_ranks() == g.local;
}

// The segment a pipeline step moves per block: small enough that a
// segment to every column peer fits the kernel's socket buffers (the
// network moves it while this rank copies through shared memory), large
// enough that a step's fixed costs stay small. Cut in elements, so that
// every rank cuts at the same place.
constexpr size_t kSegmentBytes = 512 << 10;

size_t segment_elements(size_t count, size_t element_bytes) {
  return std::min(std::max<size_t>(1, kSegmentBytes / element_bytes), std::max<size_t>(1, count));
}

// segments_of is how many segments a block of `count` elements takes (one
// for an empty block, which still meets its peers).
size_t segments_of(size_t count, size_t element_bytes) {
  const size_t seg = segment_elements(count, element_bytes);
  return count == 0 ? 1 : (count + seg - 1) / seg;
}

// InFlight is one segment's requests to and from the column peers: how
// many are left, and the first error. Shared with the completions, which
// may run after an error made the algorithm return.
struct InFlight {
  int left = 0;
  Status error;
};

Completion count_down(const std::shared_ptr<InFlight>& f) {
  ++f->left;
  return [f](const Status& st, int) {
    if (!st.ok() && f->error.ok()) f->error = st;
    --f->left;
  };
}

// finish drives the transport until the segment's requests completed. In
// slices, so that other requests in flight (a user's irecv) cannot hold
// it past its own.
Status finish(AlgoContext& c, const std::shared_ptr<InFlight>& f) {
  while (f->left > 0) {
    c.transport.progress(Deadline::sooner(c.deadline, Deadline::after(std::chrono::milliseconds(1))));
  }
  return f->error;
}

// abandon ends a failed pipeline: the group is unusable after the error,
// and no request may still point at this operation's buffers when it
// returns, so fail them all and let them complete.
Status abandon(AlgoContext& c, const std::vector<std::shared_ptr<InFlight>>& segments, Status why) {
  c.transport.interrupt(why);
  for (const auto& f : segments) {
    if (f) (void)finish(c, f);
  }
  return why;
}

// Scratch for the host step's own algorithm when it runs as messages: the
// caller's scratch holds the packed blocks meanwhile. One per thread (a
// group's operations run on one thread at a time), kept for the next
// operation.
std::vector<uint8_t>& inner_scratch() {
  thread_local std::vector<uint8_t> scratch;
  return scratch;
}

// host_all_gather and host_reduce_scatter run the host's step through
// shared memory when the slots fit, else as messages among the host's ranks.
Status host_all_gather(AlgoContext& c, shm::HostSlots* slots, const HostGrid& g, const Buffer& input,
                       const std::vector<Buffer>& outputs) {
  if (slots_fit(slots, g)) return shm_all_gather(c, *slots, input, outputs);
  SubTransport host(c.transport, g.local);
  AlgoContext host_context{host, c.sequence, c.deadline, c.what, inner_scratch()};
  return all_gather(host_context, input, outputs);
}

Status host_reduce_scatter(AlgoContext& c, shm::HostSlots* slots, const HostGrid& g, const Buffer& output,
                           const std::vector<Buffer>& inputs, ReduceOp::Kind op) {
  if (slots_fit(slots, g)) return shm_reduce_scatter(c, *slots, output, inputs, op);
  SubTransport host(c.transport, g.local);
  AlgoContext host_context{host, c.sequence, c.deadline, c.what, inner_scratch()};
  return reduce_scatter(host_context, output, inputs, op);
}

uint8_t* at(const Buffer& b, size_t offset) {
  return static_cast<uint8_t*>(b.data) + offset;
}

// The pipelines' message steps start at `first_step`, so that an
// all_reduce's all_gather is told apart from its reduce_scatter.
Status pipelined_all_gather(AlgoContext& c, shm::HostSlots* slots, const Buffer& input,
                            const std::vector<Buffer>& outputs, uint32_t first_step) {
  const HostGrid g = grid_of(c.transport);
  if (!g.even || g.local.size() < 2 || g.columns[0].size() < 2 || !same_sizes(outputs)) {
    return all_gather(c, input, outputs);
  }
  Transport& t = c.transport;
  const size_t es = dtype_size(input.dtype), count = input.count;
  const size_t hosts = g.columns[0].size(), width = g.local.size();
  const size_t seg = segment_elements(count, es), segments = segments_of(count, es);
  const std::vector<int>& mine = g.columns[static_cast<size_t>(g.me_local)];
  if (outputs[static_cast<size_t>(t.rank())].data != input.data && count) {
    std::memcpy(outputs[static_cast<size_t>(t.rank())].data, input.data, count * es);
  }
  // packed: this rank's column, one segment of each host's block;
  // gathered: every local rank's packed segment.
  uint8_t* packed = c.scratch_bytes((1 + width) * hosts * seg * es);
  uint8_t* gathered = packed + hosts * seg * es;
  std::vector<std::shared_ptr<InFlight>> flights(segments);
  // Segment k to and from every other rank of the column, straight into place.
  auto post = [&](size_t k) {
    flights[k] = std::make_shared<InFlight>();
    const size_t off = k * seg * es, n = std::min(seg, count - k * seg) * es;
    for (int q : mine) {
      if (q == t.rank()) continue;
      const uint64_t tag = c.tag(first_step + static_cast<uint32_t>(k));
      t.post_recv(RecvRequest{q, MessageKind::kCollective, tag, at(outputs[static_cast<size_t>(q)], off), n},
                  c.deadline, &c.what, count_down(flights[k]));
      t.post_send(SendRequest{q, MessageKind::kCollective, tag, at(input, off), n}, c.deadline, &c.what,
                  count_down(flights[k]));
    }
  };
  post(0);
  for (size_t k = 0; k < segments; ++k) {
    Status st = finish(c, flights[k]);
    if (!st.ok()) return abandon(c, flights, st);
    if (k + 1 < segments) post(k + 1);
    // Within the host, while the network carries segment k+1.
    const size_t off = k * seg * es, elems = std::min(seg, count - k * seg), n = elems * es;
    for (size_t h = 0; h < hosts; ++h) {
      if (n) std::memcpy(packed + h * n, at(outputs[static_cast<size_t>(mine[h])], off), n);
    }
    const Buffer own{packed, hosts * elems, input.dtype};
    std::vector<Buffer> host_outputs;
    for (size_t j = 0; j < width; ++j)
      host_outputs.push_back(Buffer{gathered + j * hosts * n, own.count, input.dtype});
    st = host_all_gather(c, slots, g, own, host_outputs);
    if (!st.ok()) return abandon(c, flights, st);
    for (size_t j = 0; j < width; ++j) {
      if (static_cast<int>(j) == g.me_local) continue;  // already in place
      for (size_t h = 0; h < hosts; ++h) {
        if (n)
          std::memcpy(at(outputs[static_cast<size_t>(g.columns[j][h])], off), gathered + (j * hosts + h) * n,
                      n);
      }
    }
  }
  return Status::ok_status();
}

Status pipelined_reduce_scatter(AlgoContext& c, shm::HostSlots* slots, const Buffer& output,
                                const std::vector<Buffer>& inputs, ReduceOp::Kind op, uint32_t first_step) {
  const HostGrid g = grid_of(c.transport);
  if (!g.even || g.local.size() < 2 || g.columns[0].size() < 2 || !same_sizes(inputs)) {
    return reduce_scatter(c, output, inputs, op);
  }
  Transport& t = c.transport;
  const size_t es = dtype_size(output.dtype), count = output.count;
  const size_t hosts = g.columns[0].size(), width = g.local.size();
  const size_t seg = segment_elements(count, es), segments = segments_of(count, es);
  const std::vector<int>& mine = g.columns[static_cast<size_t>(g.me_local)];
  const size_t me_host = static_cast<size_t>(std::find(mine.begin(), mine.end(), t.rank()) - mine.begin());
  // packed: this rank's inputs of one segment, by column; summed[2] and
  // incoming[2]: the host's sums of this rank's column and what the column
  // peers send, two segments' worth, as segment k's requests are still in
  // flight while segment k+1 is summed.
  const size_t seg_bytes = seg * es;
  uint8_t* packed = c.scratch_bytes((width * hosts + 2 * hosts + 2 * hosts) * seg_bytes);
  uint8_t* summed[2] = {packed + width * hosts * seg_bytes, packed + (width + 1) * hosts * seg_bytes};
  uint8_t* incoming[2] = {summed[1] + hosts * seg_bytes, summed[1] + 2 * hosts * seg_bytes};
  std::vector<std::shared_ptr<InFlight>> flights(segments);
  // Adds up what the column peers sent for segment k into this rank's output.
  auto land = [&](size_t k) {
    Status st = finish(c, flights[k]);
    if (!st.ok()) return st;
    const size_t elems = std::min(seg, count - k * seg), n = elems * es;
    uint8_t* out = at(output, k * seg_bytes);
    if (n) std::memcpy(out, summed[k % 2] + me_host * n, n);
    for (size_t h = 0; h < hosts; ++h) {
      if (h != me_host) reduce_into(output.dtype, op, out, incoming[k % 2] + h * n, elems);
    }
    return Status::ok_status();
  };
  for (size_t k = 0; k < segments; ++k) {
    // Within the host (while the network carries segment k-1): this rank
    // ends with the host's sums of its column's blocks.
    const size_t off = k * seg_bytes, elems = std::min(seg, count - k * seg), n = elems * es;
    std::vector<Buffer> host_inputs;
    for (size_t j = 0; j < width; ++j) {
      for (size_t h = 0; h < hosts; ++h) {
        if (n)
          std::memcpy(packed + (j * hosts + h) * n, at(inputs[static_cast<size_t>(g.columns[j][h])], off), n);
      }
      host_inputs.push_back(Buffer{packed + j * hosts * n, hosts * elems, output.dtype});
    }
    Status st =
        host_reduce_scatter(c, slots, g, Buffer{summed[k % 2], hosts * elems, output.dtype}, host_inputs, op);
    if (!st.ok()) return abandon(c, flights, st);
    if (k >= 1) {
      st = land(k - 1);
      if (!st.ok()) return abandon(c, flights, st);
    }
    // Over the network: each column peer its host's sum, and theirs in.
    flights[k] = std::make_shared<InFlight>();
    const uint64_t tag = c.tag(first_step + static_cast<uint32_t>(k));
    for (size_t h = 0; h < hosts; ++h) {
      if (h == me_host) continue;
      t.post_recv(RecvRequest{mine[h], MessageKind::kCollective, tag, incoming[k % 2] + h * n, n}, c.deadline,
                  &c.what, count_down(flights[k]));
      t.post_send(SendRequest{mine[h], MessageKind::kCollective, tag, summed[k % 2] + h * n, n}, c.deadline,
                  &c.what, count_down(flights[k]));
    }
  }
  Status st = land(segments - 1);
  return st.ok() ? st : abandon(c, flights, st);
}

}  // namespace

bool hosts_hold_equal_ranks(const Transport& t) {
  const HostGrid g = grid_of(t);
  return g.even && g.local.size() >= 2 && g.columns[0].size() >= 2;
}

Status hierarchical_all_gather(AlgoContext& c, shm::HostSlots* slots, const Buffer& input,
                               const std::vector<Buffer>& outputs) {
  return pipelined_all_gather(c, slots, input, outputs, 0);
}

Status hierarchical_reduce_scatter(AlgoContext& c, shm::HostSlots* slots, const Buffer& output,
                                   const std::vector<Buffer>& inputs, ReduceOp::Kind op) {
  return pipelined_reduce_scatter(c, slots, output, inputs, op, 0);
}

Status all_reduce_in_shares(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op) {
  const size_t p = static_cast<size_t>(c.transport.size()), me = static_cast<size_t>(c.transport.rank());
  const size_t block = buf.count / p, es = dtype_size(buf.dtype);
  std::vector<Buffer> blocks;
  for (size_t q = 0; q < p; ++q)
    blocks.push_back(Buffer{static_cast<uint8_t*>(buf.data) + q * block * es, block, buf.dtype});
  // In place: each segment of this rank's block is read (packed for the
  // host) before its sum is written back.
  Status st = pipelined_reduce_scatter(c, slots, blocks[me], blocks, op, 0);
  if (!st.ok()) return st;
  // The all_gather's steps start past the reduce_scatter's (one a segment).
  const uint32_t after = static_cast<uint32_t>(segments_of(block, es));
  return pipelined_all_gather(c, slots, blocks[me], blocks, after);
}

}  // namespace cohort
