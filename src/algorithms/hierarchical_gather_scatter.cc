// Hierarchical all_gather and reduce_scatter for a group that spans hosts
// with the same number of ranks on each (FSDP across hosts).
//
// A "column" is the ranks that hold the same local index on every host.
// all_gather: each column all_gathers over the network (every rank sends
// its own block to the other hosts once, the columns in parallel), then
// each host all_gathers its columns through shared memory. reduce_scatter
// runs the same path backwards: each host reduce_scatters so that local
// rank j holds the host's sum of the blocks of column j, then each column
// reduce_scatters over the network. Either way a host's link carries
// (H-1)/H of the data once, where a flat ring over all ranks crosses it
// with up to (P-1)/P of it (2 hosts x 2 ranks: 2 blocks against 3).
//
// Where hosts hold different numbers of ranks, or the blocks differ in
// size, the flat ring runs instead (every rank sees the same shapes, so
// every rank takes the same path).
#include <algorithm>
#include <cstring>

#include "algorithms/shm_direct.h"
#include "algorithms/sub_transport.h"

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

// Scratch for the host and column steps' own algorithms: the caller's
// scratch holds the packed blocks meanwhile. One per thread (a group's
// operations run on one thread at a time), kept for the next operation.
std::vector<uint8_t>& inner_scratch() {
  thread_local std::vector<uint8_t> scratch;
  return scratch;
}

}  // namespace

Status hierarchical_all_gather(AlgoContext& c, shm::HostSlots* slots, const Buffer& input,
                               const std::vector<Buffer>& outputs) {
  const HostGrid g = grid_of(c.transport);
  if (!g.even || g.local.size() < 2 || g.columns[0].size() < 2 || !same_sizes(outputs)) {
    return all_gather(c, input, outputs);
  }
  const size_t n = input.bytes(), hosts = g.columns[0].size(), width = g.local.size();
  const std::vector<int>& mine = g.columns[static_cast<size_t>(g.me_local)];
  // 1. Over the network, within this rank's column, straight into place.
  SubTransport column(c.transport, mine);
  AlgoContext column_context{column, c.sequence, c.deadline, c.what, inner_scratch()};
  std::vector<Buffer> column_outputs;
  for (int q : mine) column_outputs.push_back(outputs[static_cast<size_t>(q)]);
  Status st = all_gather(column_context, input, column_outputs);
  if (!st.ok()) return st;
  // 2. Within the host: every local rank's column, packed, to every other.
  uint8_t* packed = c.scratch_bytes((1 + width) * hosts * n);
  uint8_t* gathered = packed + hosts * n;
  for (size_t h = 0; h < hosts; ++h) {
    if (n) std::memcpy(packed + h * n, outputs[static_cast<size_t>(mine[h])].data, n);
  }
  Buffer own{packed, hosts * input.count, input.dtype};
  std::vector<Buffer> host_outputs;
  for (size_t j = 0; j < width; ++j)
    host_outputs.push_back(Buffer{gathered + j * hosts * n, own.count, input.dtype});
  if (slots_fit(slots, g)) {
    st = shm_all_gather(c, *slots, own, host_outputs);
  } else {
    SubTransport host(c.transport, g.local);
    AlgoContext host_context{host, c.sequence, c.deadline, c.what, inner_scratch()};
    st = all_gather(host_context, own, host_outputs);
  }
  if (!st.ok()) return st;
  for (size_t j = 0; j < width; ++j) {
    if (static_cast<int>(j) == g.me_local) continue;  // already in place
    for (size_t h = 0; h < hosts; ++h) {
      if (n)
        std::memcpy(outputs[static_cast<size_t>(g.columns[j][h])].data, gathered + (j * hosts + h) * n, n);
    }
  }
  return Status::ok_status();
}

Status hierarchical_reduce_scatter(AlgoContext& c, shm::HostSlots* slots, const Buffer& output,
                                   const std::vector<Buffer>& inputs, ReduceOp::Kind op) {
  const HostGrid g = grid_of(c.transport);
  if (!g.even || g.local.size() < 2 || g.columns[0].size() < 2 || !same_sizes(inputs)) {
    return reduce_scatter(c, output, inputs, op);
  }
  const size_t n = output.bytes(), hosts = g.columns[0].size(), width = g.local.size();
  // 1. Within the host: pack the inputs by column, so that local rank j
  // ends with the host's sum of column j's blocks.
  uint8_t* packed = c.scratch_bytes((width + 1) * hosts * n);
  uint8_t* summed = packed + width * hosts * n;
  std::vector<Buffer> host_inputs;
  for (size_t j = 0; j < width; ++j) {
    for (size_t h = 0; h < hosts; ++h) {
      if (n) std::memcpy(packed + (j * hosts + h) * n, inputs[static_cast<size_t>(g.columns[j][h])].data, n);
    }
    host_inputs.push_back(Buffer{packed + j * hosts * n, hosts * output.count, output.dtype});
  }
  const Buffer column_sum{summed, hosts * output.count, output.dtype};
  Status st;
  if (slots_fit(slots, g)) {
    st = shm_reduce_scatter(c, *slots, column_sum, host_inputs, op);
  } else {
    SubTransport host(c.transport, g.local);
    AlgoContext host_context{host, c.sequence, c.deadline, c.what, inner_scratch()};
    st = reduce_scatter(host_context, column_sum, host_inputs, op);
  }
  if (!st.ok()) return st;
  // 2. Over the network, within this rank's column.
  const std::vector<int>& mine = g.columns[static_cast<size_t>(g.me_local)];
  SubTransport column(c.transport, mine);
  AlgoContext column_context{column, c.sequence, c.deadline, c.what, inner_scratch()};
  std::vector<Buffer> column_inputs;
  for (size_t h = 0; h < hosts; ++h)
    column_inputs.push_back(Buffer{summed + h * n, output.count, output.dtype});
  return reduce_scatter(column_context, output, column_inputs, op);
}

}  // namespace cohort
