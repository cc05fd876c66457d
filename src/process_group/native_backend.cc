#include "process_group/native_backend.h"

#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/dispatch.h"
#include "algorithms/shm_direct.h"
#include "common/config_registry.h"
#include "common/debug_level.h"
#include "common/logging.h"
#include "reduce/reduce.h"
#include "transport/shm/arena.h"

namespace cohort {
namespace {

// The reduction an algorithm runs for `op`: AVG and PREMUL_SUM are sums
// with scaling around them.
ReduceOp::Kind algorithm_op(ReduceOp op) {
  return op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM ? ReduceOp::SUM : op.kind;
}

}  // namespace

NativeBackend::NativeBackend(std::unique_ptr<Transport> transport, std::shared_ptr<shm::Arena> arena_owner,
                             PeerKinds kinds)
    : Backend("cohort"),
      transport_(std::move(transport)),
      arena_(std::move(arena_owner)),
      kinds_(std::move(kinds)) {
  // The shape comes from host_of (what the link kinds' set-up learned of
  // every rank, so all ranks agree on it) and the arena (one host: every
  // rank in it); which kind reaches each peer is kinds_'s, not worked out
  // again here.
  shm::Arena* arena = arena_.get();
  int hosts = 0;
  std::vector<int> per_host(static_cast<size_t>(transport_->size()), 0);
  for (int q = 0; q < transport_->size(); ++q) {
    hosts += transport_->host_of(q) == q ? 1 : 0;
    ++per_host[static_cast<size_t>(transport_->host_of(q))];
  }
  if (arena && arena->local_size() == transport_->size()) {
    topology_ = Topology::kOneHost;
  } else if (hosts < transport_->size()) {
    topology_ = Topology::kHosts;
  }
  shape_ =
      GroupShape{transport_->size(), hosts, *std::max_element(per_host.begin(), per_host.end()), topology_};
  const char* how[] = {"no shared memory", "one host, shared memory", "shared memory within hosts"};
  log_choices_ = debug_level() != DebugLevel::kOff;
  COHORT_LOG(kDebug) << "rank " << transport_->rank() << ": " << hosts << " hosts, "
                     << how[static_cast<int>(topology_)] << "; all_reduce is "
                     << (topology_ == Topology::kHosts ? "hierarchical" : "flat")
                     << (arena && arena->single_copy_from() != SIZE_MAX
                             ? "; single-copy reads from " + std::to_string(arena->single_copy_from()) +
                                   " bytes a rank"
                             : "");
}

Result<Algorithm> NativeBackend::choose(Collective collective, size_t bytes, const OpContext& op) {
  const uint64_t generation = config_generation();
  if (generation != table_generation_) {
    table_generation_ = generation;
    // How crowded the machines are: as counted when the group connected,
    // unless COHORT_COST_RANKS_PER_CPU says.
    const double told = config_float(knobs::kCostRanksPerCpu);
    shape_.ranks_per_cpu = told > 0 ? told : transport_->ranks_per_cpu();
    table_ = AlgorithmTable::for_config(shape_);
    if (topology_ == Topology::kHosts) {
      leaders_table_ = AlgorithmTable::for_config(shape_.leaders(), true);
      columns_table_ = AlgorithmTable::for_config(shape_.columns(), true);
    }
  }
  auto algorithm = table_.choose(collective, bytes);
  forced_way_ = algorithm.ok() && algorithm.value() == Algorithm::kShmDirect ? table_.forced_way(collective, bytes)
                                                                              : ShmWay::kByRule;
  if (forced_way_ != ShmWay::kByRule) {
    // Every rank of the host has the same facts, so all refuse alike,
    // before any of them starts.
    const std::string why = why_shm_way_cannot_run(collective, forced_way_, *arena_, bytes);
    if (!why.empty()) {
      return invalid_argument("COHORT_ALGO forces " + std::string(collective_name(collective)) +
                              " through shm_direct." + shm_way_name(forced_way_) + ", which cannot run " +
                              *op.what + ": " + why);
    }
  }
  if (log_choices_ && algorithm.ok())
    choice_log_.note(collective, bytes, algorithm.value(), table_, *op.what);
  return algorithm;
}

Status NativeBackend::exchange_fingerprints(const void* mine, size_t bytes, void* all, uint8_t* arrived,
                                            const OpContext& op) {
  fingerprint_sends_.clear();
  fingerprint_recvs_.clear();
  for (int q = 0; q < transport_->size(); ++q) {
    if (q == transport_->rank()) continue;
    fingerprint_sends_.push_back(SendRequest{q, MessageKind::kFingerprint, op.sequence, mine, bytes});
    fingerprint_recvs_.push_back(RecvRequest{q, MessageKind::kFingerprint, op.sequence,
                                             static_cast<uint8_t*>(all) + static_cast<size_t>(q) * bytes,
                                             bytes});
  }
  Status st =
      transport_->exchange(fingerprint_sends_.data(), fingerprint_sends_.size(), fingerprint_recvs_.data(),
                           fingerprint_recvs_.size(), op.deadline, *op.what);
  // A receive that completed knows its source, also when another failed.
  for (const RecvRequest& r : fingerprint_recvs_) {
    if (r.source >= 0) arrived[r.peer] = 1;
  }
  return st;
}

std::vector<int> NativeBackend::lost_peers() const {
  std::vector<int> lost = transport_->lost_peers();
  // A peer on this host can die while only shared memory was in use (a
  // single-copy read fails with ESRCH): nobody reads its socket's end then,
  // so the transport never sees the connection go. Its process is gone,
  // which the arena can tell.
  if (shm::Arena* arena = arena_.get()) {
    for (int rank : arena->gone_ranks()) {
      if (std::find(lost.begin(), lost.end(), rank) == lost.end()) lost.push_back(rank);
    }
    std::sort(lost.begin(), lost.end());
  }
  return lost;
}

std::string NativeBackend::describe_links() const {
  static const char* const kTopology[] = {"no shared memory", "one host", "several hosts"};
  return std::string("links (") + kTopology[static_cast<int>(topology_)] + ")" +
         (kinds_.tried.empty() ? "" : ": " + kinds_.describe());
}

Status NativeBackend::direct_done(Status st, const OpContext& op) {
  if (!st.ok()) {
    // Tell the peers why first (the transport sends them the reason),
    // then mark this rank as gone from the operation: a peer reading this
    // rank's buffer in place sees the mark and looks at its transport for
    // the reason, which is then already there (on one host the message
    // is in its socket before the mark is set). In the other order it
    // could blame this rank for leaving instead of naming the rank that
    // died. Both happen before the caller may free its buffers.
    transport_->interrupt(st);
    // Only for its side effect (a peer's reason, when there is one, is
    // taken in); this rank's own error `st` is what is returned.
    (void)transport_->poll_health();
    if (shm::Arena* arena = arena_.get()) arena->leave(op.sequence);
  }
  return st;
}

AlgoContext NativeBackend::context(const OpContext& op, bool direct) {
  // A direct shared-memory algorithm looks at the deadline only when it
  // has to sleep: it keeps the blocking call's unconverted one. The others
  // look at it on every send and poll.
  return AlgoContext{*transport_,
                     op.sequence,
                     direct ? op.deadline : op.deadline.resolved(),
                     *op.what,
                     scratch_,
                     &leaders_table_,
                     &columns_table_,
                     log_choices_ ? &choice_log_ : nullptr,
                     direct ? forced_way_ : ShmWay::kByRule};
}

void NativeBackend::premultiply(const Buffer& buffer, ReduceOp reduce_op) {
  if (reduce_op.kind == ReduceOp::PREMUL_SUM)
    scale(buffer.dtype, buffer.data, buffer.count, reduce_op.factor);
}

double NativeBackend::folded_scale(ReduceOp reduce_op) const {
  return reduce_op.kind == ReduceOp::AVG ? 1.0 / transport_->size() : 1.0;
}

Status NativeBackend::broadcast(const Buffer& buffer, int root, const OpContext& op) {
  auto algorithm = choose(Collective::kBroadcast, buffer.bytes(), op);
  if (!algorithm.ok()) return algorithm.status();
  AlgoContext c = context(op, algorithm.value() == Algorithm::kShmDirect);
  if (algorithm.value() == Algorithm::kShmDirect) {
    return direct_done(shm_broadcast(c, *arena_, buffer, root), op);
  }
  MessagePassingCall call{Collective::kBroadcast};
  call.buffer = buffer;
  call.root = root;
  return run_message_passing(c, algorithm.value(), call);
}

Status NativeBackend::all_reduce(const Buffer& buffer, ReduceOp reduce_op, const OpContext& op) {
  auto algorithm = choose(Collective::kAllReduce, buffer.bytes(), op);
  if (!algorithm.ok()) return algorithm.status();
  premultiply(buffer, reduce_op);
  AlgoContext c = context(op, algorithm.value() == Algorithm::kShmDirect);
  Status st;
  if (algorithm.value() == Algorithm::kShmDirect) {
    return direct_done(shm_all_reduce(c, *arena_, buffer, algorithm_op(reduce_op), folded_scale(reduce_op)),
                       op);
  }
  if (algorithm.value() == Algorithm::kHierarchical || algorithm.value() == Algorithm::kHierarchicalShares) {
    st = direct_done(hierarchical_all_reduce(c, arena_.get(), buffer, algorithm_op(reduce_op),
                                             algorithm.value() == Algorithm::kHierarchicalShares),
                     op);
  } else {
    MessagePassingCall call{Collective::kAllReduce};
    call.buffer = buffer;
    call.op = algorithm_op(reduce_op);
    st = run_message_passing(c, algorithm.value(), call);
  }
  if (st.ok() && reduce_op.kind == ReduceOp::AVG) {
    scale(buffer.dtype, buffer.data, buffer.count, 1.0 / transport_->size());
  }
  return st;
}

Status NativeBackend::all_reduce_coalesced(const std::vector<Buffer>& buffers, ReduceOp reduce_op,
                                           const OpContext& op) {
  size_t count = 0;
  for (const Buffer& b : buffers) count += b.count;
  const size_t bytes = count * dtype_size(buffers.front().dtype);
  auto algorithm = choose(Collective::kAllReduce, bytes, op);
  if (!algorithm.ok()) return algorithm.status();
  // The choice depends on the total only, so every rank takes the same
  // path whatever its split into buffers.
  if (algorithm.value() != Algorithm::kShmDirect || !shm_all_reduce_takes_pieces(bytes)) {
    return Backend::all_reduce_coalesced(buffers, reduce_op, op);
  }
  for (const Buffer& b : buffers) premultiply(b, reduce_op);
  AlgoContext c = context(op, true);
  return direct_done(
      shm_all_reduce_pieces(c, *arena_, buffers, algorithm_op(reduce_op), folded_scale(reduce_op)), op);
}

Status NativeBackend::reduce(const Buffer& buffer, int root, ReduceOp reduce_op, const OpContext& op) {
  Buffer input = buffer;
  if (reduce_op.kind == ReduceOp::PREMUL_SUM) {
    if (transport_->rank() != root) {  // leave the caller's input as it was
      premul_.resize(buffer.bytes());
      if (buffer.bytes()) std::memcpy(premul_.data(), buffer.data, buffer.bytes());
      input.data = premul_.data();
    }
    scale(input.dtype, input.data, input.count, reduce_op.factor);
  }
  auto algorithm = choose(Collective::kReduce, buffer.bytes(), op);
  if (!algorithm.ok()) return algorithm.status();
  AlgoContext c = context(op, algorithm.value() == Algorithm::kShmDirect);
  MessagePassingCall call{Collective::kReduce};
  call.buffer = input;
  call.root = root;
  call.op = algorithm_op(reduce_op);
  Status st = algorithm.value() == Algorithm::kShmDirect
                  ? direct_done(shm_reduce(c, *arena_, input, root, algorithm_op(reduce_op)), op)
                  : run_message_passing(c, algorithm.value(), call);
  if (st.ok() && reduce_op.kind == ReduceOp::AVG && transport_->rank() == root) {
    scale(buffer.dtype, buffer.data, buffer.count, 1.0 / transport_->size());
  }
  return st;
}

Status NativeBackend::all_gather(const std::vector<Buffer>& outputs, const Buffer& input,
                                 const OpContext& op) {
  size_t most = 0;
  for (const Buffer& o : outputs) most = std::max(most, o.bytes());
  auto algorithm = choose(Collective::kAllGather, most, op);
  if (!algorithm.ok()) return algorithm.status();
  AlgoContext c = context(op, algorithm.value() == Algorithm::kShmDirect);
  if (algorithm.value() == Algorithm::kShmDirect) {
    return direct_done(shm_all_gather(c, *arena_, input, outputs), op);
  }
  if (algorithm.value() == Algorithm::kHierarchical) {
    return direct_done(hierarchical_all_gather(c, arena_.get(), input, outputs), op);
  }
  MessagePassingCall call{Collective::kAllGather};
  call.input = input;
  call.outputs = &outputs;
  return run_message_passing(c, algorithm.value(), call);
}

Status NativeBackend::gather(const std::vector<Buffer>& outputs, const Buffer& input, int root,
                             const OpContext& op) {
  // By this rank's own bytes (the others' are known at the root only):
  // safe while gather has one algorithm a topology.
  auto algorithm = choose(Collective::kGather, input.bytes(), op);
  if (!algorithm.ok()) return algorithm.status();
  AlgoContext c = context(op, false);
  MessagePassingCall call{Collective::kGather};
  call.input = input;
  call.outputs = &outputs;
  call.root = root;
  return run_message_passing(c, algorithm.value(), call);
}

Status NativeBackend::scatter(const Buffer& output, const std::vector<Buffer>& inputs, int root,
                              const OpContext& op) {
  // As gather: this rank's own bytes, one algorithm a topology.
  auto algorithm = choose(Collective::kScatter, output.bytes(), op);
  if (!algorithm.ok()) return algorithm.status();
  AlgoContext c = context(op, false);
  MessagePassingCall call{Collective::kScatter};
  call.output = output;
  call.inputs = &inputs;
  call.root = root;
  return run_message_passing(c, algorithm.value(), call);
}

Status NativeBackend::reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                     ReduceOp reduce_op, const OpContext& op) {
  std::vector<Buffer> views = inputs;
  if (reduce_op.kind == ReduceOp::PREMUL_SUM) {
    size_t total = 0;
    for (const Buffer& b : inputs) total += b.bytes();
    premul_.resize(total);
    size_t off = 0;
    for (Buffer& v : views) {
      if (v.bytes()) std::memcpy(premul_.data() + off, v.data, v.bytes());
      v.data = premul_.data() + off;
      scale(v.dtype, v.data, v.count, reduce_op.factor);
      off += v.bytes();
    }
  }
  // Chosen by the largest block, which every rank knows alike: by its own
  // block, ranks of uneven blocks could choose different algorithms.
  size_t most = 0;
  for (const Buffer& b : inputs) most = std::max(most, b.bytes());
  auto algorithm = choose(Collective::kReduceScatter, most, op);
  if (!algorithm.ok()) return algorithm.status();
  AlgoContext c = context(op, algorithm.value() == Algorithm::kShmDirect);
  Status st;
  if (algorithm.value() == Algorithm::kShmDirect) {
    st = direct_done(shm_reduce_scatter(c, *arena_, output, views, algorithm_op(reduce_op)), op);
  } else if (algorithm.value() == Algorithm::kHierarchical) {
    st =
        direct_done(hierarchical_reduce_scatter(c, arena_.get(), output, views, algorithm_op(reduce_op)), op);
  } else {
    MessagePassingCall call{Collective::kReduceScatter};
    call.output = output;
    call.inputs = &views;
    call.op = algorithm_op(reduce_op);
    st = run_message_passing(c, algorithm.value(), call);
  }
  if (st.ok() && reduce_op.kind == ReduceOp::AVG) {
    scale(output.dtype, output.data, output.count, 1.0 / transport_->size());
  }
  return st;
}

Status NativeBackend::all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                                 const OpContext& op) {
  size_t most = 0;
  for (const Buffer& b : inputs) most = std::max(most, b.bytes());
  auto algorithm = choose(Collective::kAllToAll, most, op);
  if (!algorithm.ok()) return algorithm.status();
  // Each rank's largest block differs between ranks of uneven splits: where
  // the table has more than one algorithm, the ranks first agree on the
  // largest block anywhere (and whether all blocks are alike, which
  // Bruck's needs) and choose by that. Even splits (all_to_all_single
  // without split sizes) have one block size on every rank, so each rank
  // chooses alike from its own and Bruck's runs at once (dispatch.cc), as
  // MPI_Alltoall's does. (Ranks whose buffers break that contract fail as
  // a desync where a message's size is wrong, or time out where their
  // sizes chose different algorithms; COHORT_DEBUG=detail names them first.)
  bool uniform = false;
  if (!op.even_blocks && table_.varies(Collective::kAllToAll)) {
    AlgoContext agreeing = context(op, false);
    auto shape = agree_all_to_all_shape(agreeing, outputs, inputs);
    if (!shape.ok()) return shape.status();
    uniform = shape.value().uniform;
    algorithm = choose(Collective::kAllToAll, shape.value().largest, op);
    if (!algorithm.ok()) return algorithm.status();
    if (algorithm.value() == Algorithm::kBruck) {
      AlgoContext c = context(op, false);
      return uniform ? bruck_all_to_all_uniform(c, outputs, inputs) : cohort::all_to_all(c, outputs, inputs);
    }
  }
  const bool direct = algorithm.value() == Algorithm::kShmDirect && shm_all_to_all_fits(*arena_);
  AlgoContext c = context(op, direct);
  if (direct) return direct_done(shm_all_to_all(c, *arena_, outputs, inputs), op);
  // shm_direct's all_to_all that does not fit the slots goes pairwise.
  MessagePassingCall call{Collective::kAllToAll};
  call.outputs = &outputs;
  call.inputs = &inputs;
  call.even_blocks = op.even_blocks;
  const Algorithm a = algorithm.value() == Algorithm::kShmDirect ? Algorithm::kPairwise : algorithm.value();
  return run_message_passing(c, a, call);
}

Status NativeBackend::barrier(const OpContext& op) {
  auto algorithm = choose(Collective::kBarrier, 0, op);
  if (!algorithm.ok()) return algorithm.status();
  AlgoContext c = context(op, algorithm.value() == Algorithm::kShmDirect);
  if (algorithm.value() == Algorithm::kShmDirect) return direct_done(shm_barrier(c, *arena_), op);
  return run_message_passing(c, algorithm.value(), MessagePassingCall{Collective::kBarrier});
}

void NativeBackend::post_send(const Buffer& buffer, int dst, int tag, const OpContext& op, Completion done) {
  SendRequest s{dst, MessageKind::kPointToPoint, static_cast<uint64_t>(static_cast<int64_t>(tag)),
                buffer.data, buffer.bytes()};
  transport_->post_send(s, op.deadline, op.what, std::move(done));
}

void NativeBackend::post_recv(const Buffer& buffer, int src, int tag, const OpContext& op, Completion done) {
  RecvRequest r{src < 0 ? kAnySource : src, MessageKind::kPointToPoint,
                static_cast<uint64_t>(static_cast<int64_t>(tag)), buffer.data, buffer.bytes()};
  transport_->post_recv(r, op.deadline, op.what, std::move(done));
}

Status NativeBackend::send_now(const Buffer& buffer, int dst, int tag, const OpContext& op) {
  SendRequest s{dst, MessageKind::kPointToPoint, static_cast<uint64_t>(static_cast<int64_t>(tag)),
                buffer.data, buffer.bytes()};
  // exchange posts it behind whatever this rank already posted to `dst`
  // (so the order of the messages is the order of the calls) and drives
  // every request in flight until this one is done.
  return transport_->exchange(&s, 1, nullptr, 0, op.deadline, *op.what);
}

Status NativeBackend::recv_now(const Buffer& buffer, int src, int tag, const OpContext& op, int* source) {
  RecvRequest r{src < 0 ? kAnySource : src, MessageKind::kPointToPoint,
                static_cast<uint64_t>(static_cast<int64_t>(tag)), buffer.data, buffer.bytes()};
  Status st = transport_->exchange(nullptr, 0, &r, 1, op.deadline, *op.what);
  *source = r.source;
  return st;
}

Result<std::shared_ptr<SymmetricMemory>> NativeBackend::alloc_symmetric(Store* store, uint64_t id,
                                                                        size_t bytes, Deadline deadline) {
  shm::Arena* arena = arena_.get();
  if (!arena || !store) return Backend::alloc_symmetric(store, id, bytes, deadline);
  const size_t region = shm::symmetric_region_bytes(bytes);
  auto segment = shm::map_symmetric(*store, *arena, id, region, deadline);
  if (!segment.ok()) {
    // Every local rank got the same answer: all fall back together.
    if (segment.status().code() == StatusCode::kTimeout || segment.status().code() == StatusCode::kStoreError)
      return segment.status();
    COHORT_LOG(kWarning) << "rank " << transport_->rank()
                         << ": symmetric memory is not shared, using ordinary memory: "
                         << segment.status().message();
    return Backend::alloc_symmetric(store, id, bytes, deadline);
  }
  std::shared_ptr<ShmSegment> mapped = std::move(segment.value());
  const std::shared_ptr<shm::SymmetricRegistry>& registry = arena->symmetric();
  registry->add(id, mapped, region);
  void* mine = static_cast<uint8_t*>(mapped->data()) + static_cast<size_t>(arena->local_index()) * region;
  // The registry may outlive the arena, and the block the registry.
  return std::make_shared<SymmetricMemory>(mine, bytes, true,
                                           [registry, id, mapped] { registry->remove(id); });
}

}  // namespace cohort
