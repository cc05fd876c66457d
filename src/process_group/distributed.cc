// The module-level API: init_process_group, the default group (the one piece
// of global state besides the config registry) and new_group.
#include "cohort/distributed.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "cohort/errors.h"
#include "cohort/prefix_store.h"
#include "common/config_registry.h"
#include "common/cpu_binding.h"
#include "common/logging.h"
#include "common/rank_list.h"
#include "process_group/backend_factory.h"
#include "process_group/dispatch_backend.h"
#include "process_group/native_backend.h"
#include "process_group/shrink_agreement.h"
#include "rendezvous/init_url.h"
#include "transport/connect_group.h"
#include "transport/tcp/connect.h"

namespace cohort {
namespace {

struct World {
  std::mutex mu;
  std::shared_ptr<Store> store;  // the job's store, before any prefix
  std::shared_ptr<ProcessGroup> group;
  std::vector<std::shared_ptr<ProcessGroup>> subgroups;
  int groups_made = 0;
  std::map<std::string, int> shrinks;  // by group name: how often it was shrunk
  std::string master_host;
  std::chrono::milliseconds timeout{0};
  BackendSpec spec;  // the default group's backends, which new_group's groups use too
};

World& world() {
  static World w;
  return w;
}

std::unique_ptr<Backend> build_native_backend(const std::shared_ptr<Store>& store, int rank,
                                              const std::vector<int>& global_ranks,
                                              std::chrono::milliseconds timeout, const std::string& name,
                                              const std::string& master_host) {
  const int size = static_cast<int>(global_ranks.size());
  auto address = tcp::local_address(master_host);
  if (!address.ok()) throw_status(address.status().with_context("group " + name));
  const Deadline deadline = Deadline::after(timeout);
  auto group = connect_group(*store, rank, global_ranks, address.value(), deadline);
  if (!group.ok()) throw_status(group.status().with_context("group " + name));
  COHORT_LOG(kInfo) << "group " << name << ": rank " << rank << " of " << size << " connected from "
                    << address.value();
  return std::make_unique<NativeBackend>(std::move(group.value().transport), std::move(group.value().arena),
                                         std::move(group.value().kinds));
}

// build_group makes the group of `global_ranks` with the backends of
// `spec` (MPI: global ranks are MPI_COMM_WORLD ranks; `tag` tells apart
// MPI groups made one after the other). `store` serves the backends that
// need one (native, NCCL).
std::shared_ptr<ProcessGroup> build_group(const BackendSpec& spec, const std::shared_ptr<Store>& store,
                                          int rank, std::vector<int> global_ranks,
                                          std::chrono::milliseconds timeout, const std::string& name,
                                          const std::string& master_host, int tag) {
  auto unwrap = [&name](Result<std::unique_ptr<Backend>> r) {
    if (!r.ok()) throw_status(r.status().with_context("group " + name));
    return std::move(r.value());
  };
  std::unique_ptr<Backend> cpu, cuda;
  if (spec.cpu == "cohort") cpu = build_native_backend(store, rank, global_ranks, timeout, name, master_host);
  if (spec.cpu == "mpi") cpu = unwrap(make_mpi_backend(global_ranks, tag));
  if (spec.cuda == "nccl") {
    cuda = unwrap(make_nccl_backend(store, rank, static_cast<int>(global_ranks.size()), timeout, name));
  }
  std::unique_ptr<Backend> backend;
  if (cpu && cuda) {
    backend = std::make_unique<DispatchBackend>(spec.canonical(), std::move(cpu), std::move(cuda));
  } else {
    backend = cpu ? std::move(cpu) : std::move(cuda);
  }
  return std::make_shared<ProcessGroup>(std::move(backend), rank, std::move(global_ranks), name, timeout,
                                        store);
}

BackendSpec parse_spec(const std::string& where, const std::string& text) {
  auto spec = parse_backend_spec(text);
  if (!spec.ok()) throw_status(spec.status().with_context(where));
  return spec.value();
}

// mpi_rank_and_size takes rank and size from MPI (the program runs under
// mpirun); given ones must agree.
void mpi_rank_and_size(const InitOptions& options, int* rank, int* size) {
  throw_if_error(mpi_world(rank, size));
  if ((options.rank >= 0 && options.rank != *rank) ||
      (options.world_size > 0 && options.world_size != *size)) {
    throw InvalidArgument("init_process_group: backend mpi takes rank and world size from MPI (rank " +
                          std::to_string(*rank) + " of " + std::to_string(*size) + ") but rank " +
                          std::to_string(options.rank) + " of " + std::to_string(options.world_size) +
                          " was given");
  }
}

std::chrono::milliseconds default_timeout() {
  return std::chrono::milliseconds(static_cast<int64_t>(config_float(knobs::kDefaultTimeoutS) * 1000));
}

GroupPtr resolve(const GroupPtr& group) {
  if (group) return group;
  std::lock_guard<std::mutex> lock(world().mu);
  if (!world().group)
    throw InvalidArgument("the default process group is not initialized: call init_process_group");
  return world().group;
}

// join_everywhere is new_group's synchronisation of every rank of the job
// (torch's default, use_local_synchronization=false): each rank, member
// or not, returns once all `world_size` have reached it, or throws
// TimeoutError after `timeout` naming how many had. Through the store, so
// that it costs the data plane nothing; MPI alone has none and uses the
// default group's barrier.
void join_everywhere(const std::shared_ptr<Store>& store, const std::string& name, int world_size,
                     std::chrono::milliseconds timeout) {
  if (!store) {
    resolve(nullptr)->barrier();
    return;
  }
  const std::string arrived = "cohort/new_group/" + name + "/joined",
                    all = "cohort/new_group/" + name + "/all";
  if (store->add(arrived, 1) == world_size) store->set(all, Bytes{1});
  try {
    store->wait({all}, timeout);
  } catch (const TimeoutError&) {
    throw TimeoutError("new_group " + name + ": " + std::to_string(store->add(arrived, 0)) + " of " +
                       std::to_string(world_size) + " ranks called new_group within " +
                       std::to_string(timeout.count()) +
                       " ms (every rank must, members or not; "
                       "use_local_synchronization=true waits for members only)");
  }
}

}  // namespace

std::shared_ptr<ProcessGroup> make_group(std::shared_ptr<Store> store, int rank, int size,
                                         std::chrono::milliseconds timeout, const std::string& name,
                                         const std::string& master_host, const std::string& backend) {
  if (!store) throw InvalidArgument("make_group: the store is null");
  if (size < 1 || rank < 0 || rank >= size) {
    throw InvalidArgument("make_group: rank " + std::to_string(rank) + " of world size " +
                          std::to_string(size) + " is out of range");
  }
  const BackendSpec spec = parse_spec("make_group", backend);
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) ranks[i] = i;
  if (timeout.count() <= 0) timeout = default_timeout();
  return build_group(spec, store, rank, std::move(ranks), timeout, name, master_host, 0);
}

void init_process_group(const InitOptions& options) {
  World& w = world();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.group)
      throw InvalidArgument("init_process_group: the default process group is already initialized");
  }
  const BackendSpec spec = parse_spec("init_process_group", options.backend);
  const auto timeout = options.timeout.count() > 0 ? options.timeout : default_timeout();
  // Before any thread of the group starts, so that all of them inherit it.
  (void)bind_from_environment();
  std::shared_ptr<Store> store = options.store;
  int rank = options.rank, world_size = options.world_size;
  std::string master_host;
  // MPI alone needs no store: it has its own rendezvous (mpirun).
  const bool needs_store = spec.cpu != "mpi" || !spec.cuda.empty();
  if (spec.cpu == "mpi") mpi_rank_and_size(options, &rank, &world_size);
  if (store) {
    if (rank < 0 || world_size < 1) {
      throw InvalidArgument("init_process_group: with a store, rank and world_size must be given (rank " +
                            std::to_string(rank) + ", world_size " + std::to_string(world_size) + ")");
    }
    if (rank >= world_size) {
      throw InvalidArgument("init_process_group: rank " + std::to_string(rank) +
                            " is out of range for world_size " + std::to_string(world_size));
    }
  } else if (needs_store) {
    Rendezvous rv = rendezvous(options.init_method, rank, world_size, timeout, &master_host);
    store = rv.store;
    rank = rv.rank;
    world_size = rv.world_size;
  }
  set_log_rank(rank);
  std::shared_ptr<Store> group_store;
  if (store) group_store = std::make_shared<PrefixStore>("cohort/" + options.group_name, store);
  std::vector<int> ranks(static_cast<size_t>(world_size));
  for (int i = 0; i < world_size; ++i) ranks[i] = i;
  auto group =
      build_group(spec, group_store, rank, std::move(ranks), timeout, options.group_name, master_host, 0);
  std::lock_guard<std::mutex> lock(w.mu);
  w.store = store;
  w.group = group;
  w.master_host = master_host;
  w.timeout = timeout;
  w.groups_made = 0;
  w.spec = spec;
}

void destroy_process_group() {
  World& w = world();
  std::shared_ptr<ProcessGroup> group;
  std::vector<std::shared_ptr<ProcessGroup>> subgroups;
  std::shared_ptr<Store> store;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    group.swap(w.group);
    subgroups.swap(w.subgroups);
    store.swap(w.store);
  }
  for (auto& g : subgroups) g->abort("destroy_process_group() was called");
  // Rank 0 hosts the store: it waits for the others before taking it away,
  // as torch's does at exit, so that nobody loses the store mid-call.
  if (group && store && group->size() > 1) {
    try {
      group->barrier();
    } catch (const DesyncError& e) {
      // The ranks' calls differ: the last chance for a rank that skipped
      // (or added) a collective to hear of it. e.what() says who is where.
      throw DesyncError(
          std::string("destroy_process_group: the final barrier found that the ranks' calls differ "
                      "(a collective skipped or added on some rank): ") +
          e.what());
    } catch (const Error& e) {
      COHORT_LOG(kWarning) << "destroy_process_group: the final barrier failed: " << e.what();
    }
  }
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(world().mu);
  return world().group != nullptr;
}

std::string get_backend(const GroupPtr& group) {
  GroupPtr g = resolve(group);
  if (!g->is_member()) {
    throw InvalidArgument("get_backend: this rank is not a member of group " + g->name() +
                          " (its handle came from new_group on a rank outside it)");
  }
  return g->backend_name();
}

bool is_available() {
  return true;
}
bool is_mpi_available() {
  return mpi_built();
}
bool is_nccl_available() {
  return nccl_built();
}
bool is_torchelastic_launched() {
  return std::getenv("TORCHELASTIC_RUN_ID") != nullptr;
}

int get_rank(const GroupPtr& group) {
  return resolve(group)->rank();
}
int get_world_size(const GroupPtr& group) {
  return resolve(group)->size();
}
std::shared_ptr<ProcessGroup> default_group() {
  return resolve(nullptr);
}

std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, std::chrono::milliseconds timeout) {
  NewGroupOptions options;
  options.timeout = timeout;
  return new_group(ranks, options);
}

std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks_in, const NewGroupOptions& options) {
  World& w = world();
  std::shared_ptr<Store> store;
  std::string name, master_host;
  int my_rank, world_size, number;
  BackendSpec spec;
  std::chrono::milliseconds timeout = options.timeout;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (!w.group) throw InvalidArgument("new_group: call init_process_group first");
    number = ++w.groups_made;
    name = "group_" + std::to_string(number);
    spec = w.spec;
    store = w.store;
    master_host = w.master_host;
    my_rank = w.group->rank();
    world_size = w.group->size();
    if (timeout.count() <= 0) timeout = w.timeout;
  }
  if (!options.backend.empty()) spec = parse_spec("new_group", options.backend);
  std::vector<int> ranks = ranks_in;
  if (ranks.empty()) {
    for (int i = 0; i < world_size; ++i) ranks.push_back(i);
  }
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= world_size) {
      throw InvalidArgument("new_group: rank " + std::to_string(r) + " is out of range for world size " +
                            std::to_string(world_size));
    }
    if (!seen.insert(r).second)
      throw InvalidArgument("new_group: rank " + std::to_string(r) + " is listed twice");
  }
  std::sort(ranks.begin(), ranks.end());  // as torch: group rank i is the i-th smallest global rank
  std::shared_ptr<ProcessGroup> group;
  auto it = std::find(ranks.begin(), ranks.end(), my_rank);
  if (it == ranks.end()) {
    group = ProcessGroup::non_member(ranks, name);
  } else {
    std::shared_ptr<Store> group_store;
    if (store) group_store = std::make_shared<PrefixStore>("cohort/" + name, store);
    group = build_group(spec, group_store, static_cast<int>(it - ranks.begin()), ranks, timeout, name,
                        master_host, number);
  }
  if (!options.use_local_synchronization) join_everywhere(store, name, world_size, timeout);
  std::lock_guard<std::mutex> lock(w.mu);
  w.subgroups.push_back(group);
  return group;
}

void destroy_process_group(const GroupPtr& group) {
  bool whole_world = !group;  // null, or the default group
  if (group) {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    whole_world = group == w.group;
    if (!whole_world) {
      auto it = std::find(w.subgroups.begin(), w.subgroups.end(), group);
      if (it == w.subgroups.end()) {
        throw InvalidArgument("destroy_process_group: group " + group->name() +
                              " is not a live group of this process (destroyed already?)");
      }
      w.subgroups.erase(it);
    }
  }
  if (whole_world) {
    destroy_process_group();  // takes the world's lock itself
    return;
  }
  // Outside the world's lock: abort wakes threads that may take it.
  group->abort("destroy_process_group(" + group->name() + ") was called");
}

std::shared_ptr<ProcessGroup> shrink_group(const GroupPtr& group, const ShrinkOptions& options) {
  World& w = world();
  GroupPtr old = resolve(group);
  const std::string what = "shrink_group of group " + old->name();
  if (!old->can_shrink()) {
    throw InvalidArgument(what + ": backend " + old->backend_name() +
                          " cannot rebuild a group without some of its ranks (MPI would need ULFM)");
  }
  std::vector<int> excluded;
  for (int global : options.ranks_to_exclude) excluded.push_back(get_group_rank(old, global));
  if (std::find(excluded.begin(), excluded.end(), old->rank()) != excluded.end()) {
    throw InvalidArgument(what + ": this rank (global " + std::to_string(old->global_ranks()[old->rank()]) +
                          ") is in ranks_to_exclude; only the ranks that stay call shrink_group");
  }
  std::shared_ptr<Store> store;
  std::string master_host, name;
  BackendSpec spec;
  bool is_default;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    is_default = w.group == old;
    store = w.store;
    master_host = w.master_host;
    spec = w.spec;
    name = old->name() + ".shrink" + std::to_string(++w.shrinks[old->name()]);
  }
  SurvivorVote vote{old->rank(), old->lost_ranks()};
  vote.suspects.insert(vote.suspects.end(), excluded.begin(), excluded.end());
  AgreementOptions agreement;
  agreement.timeout = options.timeout.count() > 0 ? options.timeout : old->timeout();
  const std::vector<int> members =
      agree_on_survivors(*old->store(), "shrink/" + name + "/", vote, old->size(), excluded, agreement, what);
  // Whatever the old group still had pending fails now, not at its timeout.
  old->abort("it was shrunk into group " + name);

  const int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), old->rank()) - members.begin());
  std::vector<int> ranks;
  for (size_t i = 0; i < members.size(); ++i) {
    ranks.push_back(is_default ? static_cast<int>(i) : old->global_ranks()[members[i]]);
  }
  COHORT_LOG(kInfo) << what << ": rank " << old->rank() << " is rank " << new_rank << " of " << members.size()
                    << " in group " << name;
  auto shrunk = build_group(spec, std::make_shared<PrefixStore>("cohort/" + name, store), new_rank,
                            std::move(ranks), old->timeout(), name, master_host, 0);
  std::lock_guard<std::mutex> lock(w.mu);
  if (is_default && w.group == old) {
    w.group = shrunk;
    set_log_rank(new_rank);
  } else {
    w.subgroups.push_back(shrunk);
  }
  return shrunk;
}

namespace {
// not_a_member is the error of a rank query on a non-member's handle.
InvalidArgument not_a_member(const char* what, const ProcessGroup& group) {
  return InvalidArgument(std::string(what) + ": this rank (global rank " + std::to_string(get_rank()) +
                         ") is not a member of group " + group.name() + " (global ranks " +
                         rank_list(group.global_ranks()) + "); its handle cannot map ranks");
}
}  // namespace

int get_group_rank(const GroupPtr& group, int global_rank) {
  if (!group) throw InvalidArgument("get_group_rank: the group is null (this rank is not a member)");
  if (!group->is_member()) throw not_a_member("get_group_rank", *group);
  const auto& r = group->global_ranks();
  auto it = std::find(r.begin(), r.end(), global_rank);
  if (it == r.end()) {
    throw InvalidArgument("get_group_rank: global rank " + std::to_string(global_rank) + " is not in group " +
                          group->name());
  }
  return static_cast<int>(it - r.begin());
}

int get_global_rank(const GroupPtr& group, int group_rank) {
  if (!group) throw InvalidArgument("get_global_rank: the group is null (this rank is not a member)");
  if (!group->is_member()) throw not_a_member("get_global_rank", *group);
  if (group_rank < 0 || group_rank >= group->size()) {
    throw InvalidArgument("get_global_rank: group rank " + std::to_string(group_rank) +
                          " is out of range for group " + group->name() + " of " +
                          std::to_string(group->size()));
  }
  return group->global_ranks()[group_rank];
}

std::vector<int> get_process_group_ranks(const GroupPtr& group) {
  if (!group) throw InvalidArgument("get_process_group_ranks: the group is null (this rank is not a member)");
  return group->global_ranks();
}

// The free functions take global ranks for src/dst/peer, as torch's do.
namespace {
// group_rank_of maps a global rank into `g`; on a non-member's handle,
// whose calls do nothing, it leaves the rank as it is.
int group_rank_of(const GroupPtr& g, int global_rank) {
  return g->is_member() ? get_group_rank(g, global_rank) : global_rank;
}
}  // namespace

std::shared_ptr<Work> broadcast(const Buffer& b, const BroadcastOptions& o, const GroupPtr& group) {
  GroupPtr g = resolve(group);
  BroadcastOptions local = o;
  local.src = group_rank_of(g, o.src);
  return g->broadcast(b, local);
}
std::shared_ptr<Work> all_reduce(const Buffer& b, const AllReduceOptions& o, const GroupPtr& group) {
  return resolve(group)->all_reduce(b, o);
}
std::shared_ptr<Work> all_reduce_coalesced(const std::vector<Buffer>& buffers, const AllReduceOptions& o,
                                           const GroupPtr& group) {
  return resolve(group)->all_reduce_coalesced(buffers, o);
}
std::shared_ptr<Work> reduce(const Buffer& b, const ReduceOptions& o, const GroupPtr& group) {
  GroupPtr g = resolve(group);
  ReduceOptions local = o;
  local.dst = group_rank_of(g, o.dst);
  return g->reduce(b, local);
}
std::shared_ptr<Work> all_gather(const std::vector<Buffer>& outputs, const Buffer& input,
                                 const AllGatherOptions& o, const GroupPtr& group) {
  return resolve(group)->all_gather(outputs, input, o);
}
std::shared_ptr<Work> all_gather_into_tensor(const Buffer& output, const Buffer& input,
                                             const AllGatherOptions& o, const GroupPtr& group) {
  return resolve(group)->all_gather_into_tensor(output, input, o);
}
std::shared_ptr<Work> gather(const std::vector<Buffer>& outputs, const Buffer& input, const GatherOptions& o,
                             const GroupPtr& group) {
  GroupPtr g = resolve(group);
  GatherOptions local = o;
  local.dst = group_rank_of(g, o.dst);
  return g->gather(outputs, input, local);
}
std::shared_ptr<Work> scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                              const ScatterOptions& o, const GroupPtr& group) {
  GroupPtr g = resolve(group);
  ScatterOptions local = o;
  local.src = group_rank_of(g, o.src);
  return g->scatter(output, inputs, local);
}
std::shared_ptr<Work> reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                     const ReduceScatterOptions& o, const GroupPtr& group) {
  return resolve(group)->reduce_scatter(output, inputs, o);
}
std::shared_ptr<Work> reduce_scatter_tensor(const Buffer& output, const Buffer& input,
                                            const ReduceScatterOptions& o, const GroupPtr& group) {
  return resolve(group)->reduce_scatter_tensor(output, input, o);
}
std::shared_ptr<Work> all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                                 const AllToAllOptions& o, const GroupPtr& group) {
  return resolve(group)->all_to_all(outputs, inputs, o);
}
std::shared_ptr<Work> all_to_all_single(const Buffer& output, const Buffer& input,
                                        const std::vector<size_t>& output_split_sizes,
                                        const std::vector<size_t>& input_split_sizes,
                                        const AllToAllOptions& o, const GroupPtr& group) {
  return resolve(group)->all_to_all_single(output, input, output_split_sizes, input_split_sizes, o);
}
std::shared_ptr<Work> barrier(const BarrierOptions& o, const GroupPtr& group) {
  return resolve(group)->barrier(o);
}
void monitored_barrier(const BarrierOptions& o, bool wait_all_ranks, const GroupPtr& group) {
  resolve(group)->monitored_barrier(o, wait_all_ranks);
}
std::shared_ptr<Work> send(const Buffer& b, int dst, const P2POptions& o, const GroupPtr& group) {
  GroupPtr g = resolve(group);
  return g->send(b, group_rank_of(g, dst), o);
}
std::shared_ptr<Work> recv(const Buffer& b, int src, const P2POptions& o, const GroupPtr& group) {
  GroupPtr g = resolve(group);
  return g->recv(b, src == kAnySourceRank ? kAnySourceRank : group_rank_of(g, src), o);
}
std::shared_ptr<Work> isend(const Buffer& b, int dst, int tag, const GroupPtr& group) {
  GroupPtr g = resolve(group);
  return g->isend(b, group_rank_of(g, dst), tag);
}
std::shared_ptr<Work> irecv(const Buffer& b, int src, int tag, const GroupPtr& group) {
  GroupPtr g = resolve(group);
  return g->irecv(b, src == kAnySourceRank ? kAnySourceRank : group_rank_of(g, src), tag);
}
std::vector<std::shared_ptr<Work>> batch_isend_irecv(const std::vector<P2POp>& ops, const GroupPtr& group) {
  GroupPtr g = resolve(group);
  std::vector<P2POp> local = ops;
  for (auto& op : local) op.peer = group_rank_of(g, op.peer);
  return g->batch_isend_irecv(local);
}

}  // namespace cohort
