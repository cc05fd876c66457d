// Hierarchical all_gather and reduce_scatter for a group that spans hosts
// with the same number of ranks on each (FSDP across hosts).
//
// A "column" is the ranks that hold the same local index on every host.
// all_gather: each rank's block goes round a ring of its column over the
// network (the columns in parallel), then each host all_gathers its
// columns through shared memory. reduce_scatter runs the same path
// backwards: each host reduce_scatters so that local rank j holds the
// host's sum of the blocks of column j, then the column's ring adds the
// hosts' sums up, each rank ending with the total of its own block.
// Either way a host's link carries (H-1)/H of the data once, where
// a flat ring over all ranks crosses it with up to (P-1)/P of it (2 hosts
// x 2 ranks: 2 blocks against 3).
//
// Pipelined: the blocks go in segments, and while the network carries
// one tick of the ring (posted requests, which the kernel's socket buffers
// and the shared-memory waits keep moving) the host works on a segment
// that has finished its hops (or is about to start them), so the copies
// through shared memory hide behind the link.
//
// The column step is the ring only where the between-hosts table says so
// (AlgoContext::columns, priced for H ranks that each share their host's
// link with the host's other columns): at many hosts and small blocks its
// H-1 dependent steps cost more than Bruck's or recursive halving's log2 H,
// which then run over the column, one step after the host's, unpipelined.
//
// Where hosts hold different numbers of ranks, or the blocks differ in
// size, the flat ring runs instead (every rank sees the same shapes, so
// every rank takes the same path).
#include <algorithm>
#include <cstring>

#include "algorithms/dispatch.h"
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

// splits_into_columns: every host has the same ranks (two or more), there
// are two hosts or more, and every block has one size.
bool splits_into_columns(const HostGrid& g, const std::vector<Buffer>& blocks) {
  return g.even && g.local.size() >= 2 && g.columns[0].size() >= 2 && same_sizes(blocks);
}

// The host's step runs through shared memory when the slots hold exactly
// this host's ranks in the same order, else as messages among them.
bool slots_fit(const shm::HostSlots* slots, const HostGrid& g) {
  return slots && slots->local_ranks() == g.local;
}

// The segment a pipeline step moves per block: small enough that a tick's
// segments (up to H-1, to the next host) mostly fit the kernel's socket
// buffers (the network moves them while this rank copies through shared
// memory), large enough that a step's fixed costs stay small. Cut in
// elements, so that every rank cuts at the same place.
constexpr size_t kGatherScatterSegmentBytes = 512 << 10;
// A block of a few segments is cut finer, down to kLeastSegmentBytes, so
// that it still makes kLeastSegments: with one segment the column ring's
// hops, and the host's step, run one after another (4 hosts x 2 ranks,
// 4 MiB: blocks of 512 KiB, 0.77-0.82 of the link's speed).
constexpr size_t kLeastSegmentBytes = 64 << 10;
constexpr size_t kLeastSegments = 8;

size_t segment_elements(size_t count, size_t element_bytes) {
  const size_t fine = std::max(kLeastSegmentBytes, count * element_bytes / kLeastSegments);
  const size_t bytes = std::min(kGatherScatterSegmentBytes, fine);
  return std::min(std::max<size_t>(1, bytes / element_bytes), std::max<size_t>(1, count));
}

// segments_of is how many segments a block of `count` elements takes (one
// for an empty block, which still meets its peers).
size_t segments_of(size_t count, size_t element_bytes) {
  const size_t seg = segment_elements(count, element_bytes);
  return count == 0 ? 1 : (count + seg - 1) / seg;
}

// InFlight is one tick's requests to and from the column ring's
// neighbours: how many are left, and the first error. Shared with the
// completions, which may run after an error made the algorithm return.
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

// finish drives the transport until the tick's requests completed. In
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
Status abandon(AlgoContext& c, const std::vector<std::shared_ptr<InFlight>>& ticks, Status why) {
  c.transport.interrupt(why);
  for (const auto& f : ticks) {
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

// gather_within_host is all_gather's host step for elements [first,
// first + elems) of every block: this rank's column's blocks (in the
// outputs already) go to every local rank, and the other columns' come
// back into the outputs. `packed` holds H x elems, `gathered` width times
// that.
Status gather_within_host(AlgoContext& c, shm::HostSlots* slots, const HostGrid& g,
                          const std::vector<Buffer>& outputs, size_t first, size_t elems, DType dtype,
                          uint8_t* packed, uint8_t* gathered) {
  const size_t es = dtype_size(dtype), off = first * es, n = elems * es;
  const size_t hosts = g.columns[0].size(), width = g.local.size();
  const std::vector<int>& mine = g.columns[static_cast<size_t>(g.me_local)];
  for (size_t h = 0; h < hosts; ++h) {
    if (n) std::memcpy(packed + h * n, at(outputs[static_cast<size_t>(mine[h])], off), n);
  }
  const Buffer own{packed, hosts * elems, dtype};
  std::vector<Buffer> host_outputs;
  for (size_t j = 0; j < width; ++j) host_outputs.push_back(Buffer{gathered + j * hosts * n, own.count, dtype});
  Status st = host_all_gather(c, slots, g, own, host_outputs);
  if (!st.ok()) return st;
  for (size_t j = 0; j < width; ++j) {
    if (static_cast<int>(j) == g.me_local) continue;  // already in place
    for (size_t h = 0; h < hosts; ++h) {
      if (n) std::memcpy(at(outputs[static_cast<size_t>(g.columns[j][h])], off), gathered + (j * hosts + h) * n, n);
    }
  }
  return Status::ok_status();
}

// sum_within_host is reduce_scatter's host step for elements [first,
// first + elems) of every block: `summed` (H x elems) ends with the host's
// sums of this rank's column's blocks. `packed` holds width x H x elems.
Status sum_within_host(AlgoContext& c, shm::HostSlots* slots, const HostGrid& g,
                       const std::vector<Buffer>& inputs, size_t first, size_t elems, DType dtype,
                       ReduceOp::Kind op, uint8_t* packed, uint8_t* summed) {
  const size_t es = dtype_size(dtype), off = first * es, n = elems * es;
  const size_t hosts = g.columns[0].size(), width = g.local.size();
  std::vector<Buffer> host_inputs;
  for (size_t j = 0; j < width; ++j) {
    for (size_t h = 0; h < hosts; ++h) {
      if (n) std::memcpy(packed + (j * hosts + h) * n, at(inputs[static_cast<size_t>(g.columns[j][h])], off), n);
    }
    host_inputs.push_back(Buffer{packed + j * hosts * n, hosts * elems, dtype});
  }
  return host_reduce_scatter(c, slots, g, Buffer{summed, hosts * elems, dtype}, host_inputs, op);
}

// column_algorithm: the between-hosts table's choice for a column's step
// with blocks of `bytes`; without a table (tests, tools), the cost model's.
Result<Algorithm> column_algorithm(const AlgoContext& c, const HostGrid& g, Collective collective,
                                   size_t bytes) {
  if (c.columns) return c.columns->choose(collective, bytes);
  const GroupShape column = GroupShape::between_hosts(static_cast<int>(g.columns[0].size()),
                                                      static_cast<int>(g.local.size()));
  return cheapest(collective, column, CostModel::from_config(), static_cast<double>(bytes));
}

// run_over_column runs `between` for `call` among this rank's column (its
// own scratch: the caller's holds the host step's buffers).
Status run_over_column(AlgoContext& c, const HostGrid& g, Algorithm between, const MessagePassingCall& call) {
  SubTransport column(c.transport, g.columns[static_cast<size_t>(g.me_local)]);
  AlgoContext column_context{column, c.sequence, c.deadline, c.what, inner_scratch()};
  return run_message_passing(column_context, between, call);
}

// column_all_gather: the column's blocks by `between`, then the host's step.
Status column_all_gather(AlgoContext& c, shm::HostSlots* slots, const HostGrid& g, const Buffer& input,
                         const std::vector<Buffer>& outputs, Algorithm between) {
  std::vector<Buffer> column_outputs;
  for (int q : g.columns[static_cast<size_t>(g.me_local)]) column_outputs.push_back(outputs[static_cast<size_t>(q)]);
  MessagePassingCall call(Collective::kAllGather);
  call.input = input;
  call.outputs = &column_outputs;
  Status st = run_over_column(c, g, between, call);
  if (!st.ok()) return st;
  const size_t hosts = g.columns[0].size(), width = g.local.size(), n = input.bytes();
  uint8_t* packed = c.scratch_bytes((1 + width) * hosts * n);
  return gather_within_host(c, slots, g, outputs, 0, input.count, input.dtype, packed, packed + hosts * n);
}

// column_reduce_scatter: the host's sums first, then `between` adds the
// hosts' up along the column. Every input is read before the output is
// written, so the output may be one of them.
Status column_reduce_scatter(AlgoContext& c, shm::HostSlots* slots, const HostGrid& g, const Buffer& output,
                             const std::vector<Buffer>& inputs, ReduceOp::Kind op, Algorithm between) {
  const size_t hosts = g.columns[0].size(), width = g.local.size(), n = output.bytes();
  uint8_t* summed = c.scratch_bytes((width + 1) * hosts * n);
  Status st = sum_within_host(c, slots, g, inputs, 0, output.count, output.dtype, op, summed + hosts * n, summed);
  if (!st.ok()) return st;
  std::vector<Buffer> column_inputs;
  for (size_t h = 0; h < hosts; ++h) column_inputs.push_back(Buffer{summed + h * n, output.count, output.dtype});
  MessagePassingCall call(Collective::kReduceScatter);
  call.output = output;
  call.inputs = &column_inputs;
  call.op = op;
  return run_over_column(c, g, between, call);
}

// The column step is a ring among the column's hosts, run as a wavefront:
// in tick t, segment k takes its hop s = t - k (of H-1), so the ring moves
// up to H-1 segments at once, each to the right neighbour. Each link then
// carries one stream, to one host, all the time: at 4 hosts, sending every
// column peer its segment directly (every pair at once, as an all_to_all)
// ran at 0.77-0.86 of the link's speed, as every host sending to every
// other at once does over plain TCP (raw_tcp_all_to_all.py), where a ring's
// single streams run at 0.95. At 2 hosts one hop is the direct exchange.
struct ColumnRing {
  size_t hosts;  // H, the column's length
  size_t me;     // this host's place in the column
  int right;     // the next host's rank in the column
  int left;      // the previous host's
  size_t segments;

  size_t hops() const { return hosts - 1; }
  size_t ticks() const { return segments + hosts - 2; }
  // The hops (s) of tick t: every s with segment t - s in range.
  size_t first_hop(size_t t) const { return t >= segments ? t - segments + 1 : 0; }
  size_t last_hop(size_t t) const { return std::min(t, hosts - 2); }
  // The host d places before this one in the column (d <= H): whose block
  // a hop carries. all_gather's hop s sends block behind(s) (brought in
  // by hop s-1) and brings in behind(s+1); reduce_scatter's sends the
  // running total of behind(s+1) and brings in that of behind(s+2).
  size_t behind(size_t d) const { return (me + 2 * hosts - d) % hosts; }
};

ColumnRing column_ring(const HostGrid& g, int rank, size_t segments) {
  const std::vector<int>& column = g.columns[static_cast<size_t>(g.me_local)];
  ColumnRing ring{};
  ring.hosts = column.size();
  ring.me = static_cast<size_t>(std::find(column.begin(), column.end(), rank) - column.begin());
  ring.right = column[(ring.me + 1) % ring.hosts];
  ring.left = column[(ring.me + ring.hosts - 1) % ring.hosts];
  ring.segments = segments;
  return ring;
}

// The pipelines' message steps start at `first_step` (one per segment and
// hop), so that an all_reduce's all_gather is told apart from its
// reduce_scatter.
uint64_t hop_tag(AlgoContext& c, uint32_t first_step, const ColumnRing& ring, size_t k, size_t s) {
  return c.tag(first_step + static_cast<uint32_t>(k * ring.hops() + s));
}

// The pipelines run where the grid splits_into_columns.
Status pipelined_all_gather(AlgoContext& c, shm::HostSlots* slots, const HostGrid& g, const Buffer& input,
                            const std::vector<Buffer>& outputs, uint32_t first_step) {
  Transport& t = c.transport;
  const size_t es = dtype_size(input.dtype), count = input.count;
  const size_t hosts = g.columns[0].size(), width = g.local.size();
  const size_t seg = segment_elements(count, es);
  const ColumnRing ring = column_ring(g, t.rank(), segments_of(count, es));
  const std::vector<int>& mine = g.columns[static_cast<size_t>(g.me_local)];
  if (outputs[static_cast<size_t>(t.rank())].data != input.data && count) {
    std::memcpy(outputs[static_cast<size_t>(t.rank())].data, input.data, count * es);
  }
  // packed: this rank's column, one segment of each host's block;
  // gathered: every local rank's packed segment.
  uint8_t* packed = c.scratch_bytes((1 + width) * hosts * seg * es);
  uint8_t* gathered = packed + hosts * seg * es;
  std::vector<std::shared_ptr<InFlight>> flights(ring.ticks());
  // Tick `tick`'s hops, straight from and into place in the outputs.
  auto post = [&](size_t tick) {
    flights[tick] = std::make_shared<InFlight>();
    for (size_t s = ring.first_hop(tick); s <= ring.last_hop(tick); ++s) {
      const size_t k = tick - s, off = k * seg * es, n = std::min(seg, count - k * seg) * es;
      const uint64_t tag = hop_tag(c, first_step, ring, k, s);
      const Buffer& into = outputs[static_cast<size_t>(mine[ring.behind(s + 1)])];
      const Buffer& from = outputs[static_cast<size_t>(mine[ring.behind(s)])];
      t.post_recv(RecvRequest{ring.left, MessageKind::kCollective, tag, at(into, off), n}, c.deadline,
                  &c.what, count_down(flights[tick]));
      t.post_send(SendRequest{ring.right, MessageKind::kCollective, tag, at(from, off), n}, c.deadline,
                  &c.what, count_down(flights[tick]));
    }
  };
  post(0);
  for (size_t tick = 0; tick < ring.ticks(); ++tick) {
    Status st = finish(c, flights[tick]);
    if (!st.ok()) return abandon(c, flights, st);
    if (tick + 1 < ring.ticks()) post(tick + 1);
    if (tick < hosts - 2) continue;  // no segment has made every hop yet
    // Within the host, while the network carries the next tick: the
    // segment whose last hop this tick was.
    const size_t k = tick - (hosts - 2);
    st = gather_within_host(c, slots, g, outputs, k * seg, std::min(seg, count - k * seg), input.dtype, packed,
                            gathered);
    if (!st.ok()) return abandon(c, flights, st);
  }
  return Status::ok_status();
}

// reduce_scatter: segment k is first summed within the host (this rank
// gets the host's sums of its column's blocks), then goes round the column
// ring: hop s sends the running total of block me-s-1 and brings in the
// total of block me-s-2, to which this host's sum is added before the
// next hop sends it on; the last hop brings in this rank's own block.
Status pipelined_reduce_scatter(AlgoContext& c, shm::HostSlots* slots, const HostGrid& g, const Buffer& output,
                                const std::vector<Buffer>& inputs, ReduceOp::Kind op, uint32_t first_step) {
  Transport& t = c.transport;
  const size_t es = dtype_size(output.dtype), count = output.count;
  const size_t hosts = g.columns[0].size(), width = g.local.size();
  const size_t seg = segment_elements(count, es);
  const ColumnRing ring = column_ring(g, t.rank(), segments_of(count, es));
  // Segment k's buffers are in use from its host step (loop turn k) to the
  // landing of its last hop (turn k + H - 1), and segment k + H's host step
  // comes a turn later: H segments' buffers, used round-robin. Each: the
  // host's sums of this rank's column (H blocks) and two hop buffers, one
  // arriving while the other is sent on.
  const size_t live = hosts, seg_bytes = seg * es, per_segment = (hosts + 2) * seg_bytes;
  uint8_t* packed = c.scratch_bytes(width * hosts * seg_bytes + live * per_segment);
  uint8_t* segment_space = packed + width * hosts * seg_bytes;
  auto summed = [&](size_t k) { return segment_space + (k % live) * per_segment; };
  auto hop_buffer = [&](size_t k, size_t s) { return summed(k) + (hosts + s % 2) * seg_bytes; };
  auto bytes_of = [&](size_t k) { return std::min(seg, count - k * seg) * es; };
  std::vector<std::shared_ptr<InFlight>> flights(ring.ticks());
  // What tick `tick` brought in: this host's sum added to each running
  // total, or, after the last hop, this rank's block done.
  auto land = [&](size_t tick) {
    Status st = finish(c, flights[tick]);
    if (!st.ok()) return st;
    for (size_t s = ring.first_hop(tick); s <= ring.last_hop(tick); ++s) {
      const size_t k = tick - s, n = bytes_of(k), elems = n / es;
      const uint8_t* own_sum = summed(k) + ring.behind(s + 2) * n;
      if (s + 1 < ring.hops()) {
        reduce_into(output.dtype, op, hop_buffer(k, s), own_sum, elems);
      } else {
        uint8_t* out = at(output, k * seg_bytes);
        if (n) std::memcpy(out, own_sum, n);
        reduce_into(output.dtype, op, out, hop_buffer(k, s), elems);
      }
    }
    return Status::ok_status();
  };
  auto post = [&](size_t tick) {
    flights[tick] = std::make_shared<InFlight>();
    for (size_t s = ring.first_hop(tick); s <= ring.last_hop(tick); ++s) {
      const size_t k = tick - s, n = bytes_of(k);
      const uint64_t tag = hop_tag(c, first_step, ring, k, s);
      const uint8_t* from = s == 0 ? summed(k) + ring.behind(1) * n : hop_buffer(k, s - 1);
      t.post_recv(RecvRequest{ring.left, MessageKind::kCollective, tag, hop_buffer(k, s), n}, c.deadline,
                  &c.what, count_down(flights[tick]));
      t.post_send(SendRequest{ring.right, MessageKind::kCollective, tag, from, n}, c.deadline, &c.what,
                  count_down(flights[tick]));
    }
  };
  for (size_t tick = 0; tick <= ring.ticks(); ++tick) {
    if (tick < ring.segments) {
      // Within the host (while the network carries the tick before): this
      // rank ends with the host's sums of its column's blocks.
      const size_t k = tick;
      Status st = sum_within_host(c, slots, g, inputs, k * seg, std::min(seg, count - k * seg), output.dtype, op,
                                  packed, summed(k));
      if (!st.ok()) return abandon(c, flights, st);
    }
    if (tick >= 1) {
      Status st = land(tick - 1);
      if (!st.ok()) return abandon(c, flights, st);
    }
    if (tick < ring.ticks()) post(tick);
  }
  return Status::ok_status();
}

}  // namespace

bool hosts_hold_equal_ranks(const Transport& t) {
  const HostGrid g = grid_of(t);
  return g.even && g.local.size() >= 2 && g.columns[0].size() >= 2;
}

Status hierarchical_all_gather(AlgoContext& c, shm::HostSlots* slots, const Buffer& input,
                               const std::vector<Buffer>& outputs) {
  const HostGrid g = grid_of(c.transport);
  if (!splits_into_columns(g, outputs)) return all_gather(c, input, outputs);
  Result<Algorithm> between = column_algorithm(c, g, Collective::kAllGather, input.bytes());
  if (!between.ok()) return between.status();
  if (between.value() == Algorithm::kRing) return pipelined_all_gather(c, slots, g, input, outputs, 0);
  return column_all_gather(c, slots, g, input, outputs, between.value());
}

Status hierarchical_reduce_scatter(AlgoContext& c, shm::HostSlots* slots, const Buffer& output,
                                   const std::vector<Buffer>& inputs, ReduceOp::Kind op) {
  const HostGrid g = grid_of(c.transport);
  if (!splits_into_columns(g, inputs)) return reduce_scatter(c, output, inputs, op);
  Result<Algorithm> between = column_algorithm(c, g, Collective::kReduceScatter, output.bytes());
  if (!between.ok()) return between.status();
  if (between.value() == Algorithm::kRing) return pipelined_reduce_scatter(c, slots, g, output, inputs, op, 0);
  return column_reduce_scatter(c, slots, g, output, inputs, op, between.value());
}

size_t column_pipeline_segments(size_t block_bytes) {
  return segments_of(block_bytes, 1);
}

Status all_reduce_in_shares(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op) {
  const size_t p = static_cast<size_t>(c.transport.size()), me = static_cast<size_t>(c.transport.rank());
  const size_t block = buf.count / p, es = dtype_size(buf.dtype);
  std::vector<Buffer> blocks;
  for (size_t q = 0; q < p; ++q)
    blocks.push_back(Buffer{static_cast<uint8_t*>(buf.data) + q * block * es, block, buf.dtype});
  // Large buffers (the table's hierarchical_shares), whose shares the
  // column ring carries at the link's speed. In place: each segment of this rank's
  // block is read (packed for the host) before its sum is written back.
  const HostGrid g = grid_of(c.transport);
  Status st = pipelined_reduce_scatter(c, slots, g, blocks[me], blocks, op, 0);
  if (!st.ok()) return st;
  // The all_gather's steps start past the reduce_scatter's (one a segment
  // and hop).
  const size_t hops = g.columns[0].size() - 1;
  const uint32_t after = static_cast<uint32_t>(segments_of(block, es) * hops);
  return pipelined_all_gather(c, slots, g, blocks[me], blocks, after);
}

}  // namespace cohort
