// distributed.h: torch.distributed's module-level API: init_process_group,
// the default group, new_group, and free functions that run on the default
// group (or the group given).
//
//   cohort::InitOptions init;                       // env:// by default
//   cohort::init_process_group(init);                // blocks until all joined
//   float x[4] = {...};
//   cohort::all_reduce(cohort::Buffer::of(x, 4));    // SUM on every rank
//   cohort::destroy_process_group();
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cohort/process_group.h"
#include "cohort/store.h"

namespace cohort {

// InitOptions are init_process_group's arguments, with torch's defaults.
struct InitOptions {
  // backend: "cohort" (also accepted: "native", and "gloo" as a synonym so
  // that torch programs port unchanged), "mpi" (under mpirun: rank and size
  // come from MPI), "nccl" (CUDA buffers), or one backend per device as
  // torch writes it: "cpu:cohort,cuda:nccl", "cpu:mpi,cuda:nccl". Unknown
  // names or devices throw InvalidArgument.
  std::string backend = "cohort";
  // init_method: env://, tcp://host:port or file:///path; ignored when a
  // store is given.
  std::string init_method = "env://";
  std::shared_ptr<Store> store;
  int rank = -1;        // -1: from the init method (RANK for env://)
  int world_size = -1;  // -1: from the init method (WORLD_SIZE for env://)
  // timeout of the group's operations and of joining; 0: COHORT_TIMEOUT_S
  // (30 minutes, torch's default).
  std::chrono::milliseconds timeout{0};
  std::string group_name = "default";
};

// init_process_group joins the job: rendezvous through the init method or
// store (rank 0 hosts the TcpStore server), then a connection to every
// other rank. Blocks until every rank joined, or throws TimeoutError listing
// the ranks that never arrived. Throws InvalidArgument for a missing or
// malformed setting (naming it) and when already initialized.
void init_process_group(const InitOptions& options = {});

// destroy_process_group tears down the default group and every group made
// by new_group (their Works complete with an error). Its last step is a
// barrier (rank 0 hosts the store, and must not take it away mid-call);
// when that barrier finds that the ranks' calls differ (one skipped or
// added a collective), it throws that DesyncError, naming who is where,
// after tearing everything down, so that such a rank does not exit 0.
// Other failures of that barrier (a peer that already failed) are logged.
void destroy_process_group();
// destroy_process_group(group) destroys that group alone (torch's
// destroy_process_group(group)): its running and later operations fail;
// the default group's handle, or null, destroys everything as above.
// Throws InvalidArgument for a group destroyed already.
void destroy_process_group(const std::shared_ptr<ProcessGroup>& group);

bool is_initialized();
// get_rank and get_world_size: of the default group, or of `group`; -1
// for a group this rank is not a member of (as torch).
int get_rank(const std::shared_ptr<ProcessGroup>& group = nullptr);
int get_world_size(const std::shared_ptr<ProcessGroup>& group = nullptr);

// The backend queries of torch.distributed. Backend names are spelled as
// torch spells them: "cohort", "mpi", "nccl" ("gloo" is accepted as a
// synonym of "cohort").
struct BackendName {
  static constexpr const char* kCohort = "cohort";
  static constexpr const char* kGloo = "gloo";
  static constexpr const char* kMpi = "mpi";
  static constexpr const char* kNccl = "nccl";
};
// get_backend names the backend that runs `group` (the default group when
// null): "cohort", "mpi", "nccl", or torch's per-device form
// "cpu:cohort,cuda:nccl". Throws InvalidArgument before
// init_process_group and for a group this rank is not a member of (as
// torch raises for GroupMember.NON_GROUP_MEMBER).
std::string get_backend(const std::shared_ptr<ProcessGroup>& group = nullptr);
// is_available: cohort's process groups are always built.
bool is_available();
// is_mpi_available and is_nccl_available say whether this build has the
// MPI and NCCL backends (NCCL: built; whether a GPU is present is asked
// when a group is made).
bool is_mpi_available();
bool is_nccl_available();
// is_torchelastic_launched is true in a worker that a launcher started
// (cohortrun, or torchrun: TORCHELASTIC_RUN_ID is set), as torch's.
bool is_torchelastic_launched();

// default_group returns the group of every rank (torch's WORLD).
std::shared_ptr<ProcessGroup> default_group();

// NewGroupOptions are new_group's arguments after the ranks, with torch's
// defaults.
struct NewGroupOptions {
  // timeout of the group's operations; 0: the default group's.
  std::chrono::milliseconds timeout{0};
  // backend of the group ("cohort", "mpi", "nccl", or per device as
  // "cpu:cohort,cuda:nccl"); empty: the default group's.
  std::string backend;
  // false (torch's default): every rank of the job, member or not, waits
  // in new_group until all have called it; true: only the members
  // synchronise (among themselves, as they connect) and others return at
  // once.
  bool use_local_synchronization = false;
};

// new_group makes a group of the given global ranks (empty: all), sorted as
// torch sorts them: group rank i is the i-th smallest. Every rank must call
// it, in the same order as the others (as in torch). A rank not in the
// list gets a handle that is not a member (ProcessGroup::non_member: its
// calls do nothing, get_rank and get_world_size of it are -1), never
// nullptr, which would mean the default group. Throws InvalidArgument for
// duplicate or out-of-range ranks or an unknown backend, TimeoutError when
// the ranks do not all arrive within the timeout.
std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, const NewGroupOptions& options);
std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks = {},
                                        std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

// ShrinkOptions are shrink_group's arguments.
struct ShrinkOptions {
  // Global ranks to leave out although alive (torch's ranks_to_exclude);
  // they must not call shrink_group.
  std::vector<int> ranks_to_exclude;
  // How long the survivors wait for a rank that none of them saw go (a
  // stopped process, say) before they shrink without it; 0: the group's
  // timeout.
  std::chrono::milliseconds timeout{0};
};

// shrink_group is for after a failure: every surviving rank of `group` (the
// default group when null) calls it and gets a new, working group of the
// ranks still alive, agreed through the group's store, without restarting
// any process. The survivors keep their order and are numbered 0..n-1.
// Shrinking the default group replaces it (get_rank, get_world_size and the
// free functions use the new one; the global ranks are renumbered); groups
// made by new_group stay as they were. The old group is aborted. It needs
// the store to survive (rank 0 hosts it under env:// and tcp://) and a
// backend that can be rebuilt (cohort, nccl; not mpi: InvalidArgument).
// A rank that arrives after the survivors were agreed gets NetworkError.
// torch.distributed has shrink_group for NCCL only; MPI calls it ULFM.
std::shared_ptr<ProcessGroup> shrink_group(const std::shared_ptr<ProcessGroup>& group = nullptr,
                                           const ShrinkOptions& options = {});

// get_group_rank maps a global rank to its rank in `group` (InvalidArgument
// when it is not a member); get_global_rank maps back.
int get_group_rank(const std::shared_ptr<ProcessGroup>& group, int global_rank);
int get_global_rank(const std::shared_ptr<ProcessGroup>& group, int group_rank);
std::vector<int> get_process_group_ranks(const std::shared_ptr<ProcessGroup>& group);

// The module-level operations: on `group`, or on the default group.
using GroupPtr = std::shared_ptr<ProcessGroup>;
std::shared_ptr<Work> broadcast(const Buffer& buffer, const BroadcastOptions& options = {},
                                const GroupPtr& group = nullptr);
std::shared_ptr<Work> all_reduce(const Buffer& buffer, const AllReduceOptions& options = {},
                                 const GroupPtr& group = nullptr);
std::shared_ptr<Work> all_reduce_coalesced(const std::vector<Buffer>& buffers,
                                           const AllReduceOptions& options = {},
                                           const GroupPtr& group = nullptr);
std::shared_ptr<Work> reduce(const Buffer& buffer, const ReduceOptions& options = {},
                             const GroupPtr& group = nullptr);
std::shared_ptr<Work> all_gather(const std::vector<Buffer>& outputs, const Buffer& input,
                                 const AllGatherOptions& options = {}, const GroupPtr& group = nullptr);
std::shared_ptr<Work> all_gather_into_tensor(const Buffer& output, const Buffer& input,
                                             const AllGatherOptions& options = {},
                                             const GroupPtr& group = nullptr);
std::shared_ptr<Work> gather(const std::vector<Buffer>& outputs, const Buffer& input,
                             const GatherOptions& options = {}, const GroupPtr& group = nullptr);
std::shared_ptr<Work> scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                              const ScatterOptions& options = {}, const GroupPtr& group = nullptr);
std::shared_ptr<Work> reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                     const ReduceScatterOptions& options = {},
                                     const GroupPtr& group = nullptr);
std::shared_ptr<Work> reduce_scatter_tensor(const Buffer& output, const Buffer& input,
                                            const ReduceScatterOptions& options = {},
                                            const GroupPtr& group = nullptr);
std::shared_ptr<Work> all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                                 const AllToAllOptions& options = {}, const GroupPtr& group = nullptr);
std::shared_ptr<Work> all_to_all_single(const Buffer& output, const Buffer& input,
                                        const std::vector<size_t>& output_split_sizes = {},
                                        const std::vector<size_t>& input_split_sizes = {},
                                        const AllToAllOptions& options = {}, const GroupPtr& group = nullptr);
std::shared_ptr<Work> barrier(const BarrierOptions& options = {}, const GroupPtr& group = nullptr);
void monitored_barrier(const BarrierOptions& options = {}, bool wait_all_ranks = false,
                       const GroupPtr& group = nullptr);
// send/recv take global ranks, as torch's module-level functions do.
std::shared_ptr<Work> send(const Buffer& buffer, int dst, const P2POptions& options = {},
                           const GroupPtr& group = nullptr);
std::shared_ptr<Work> recv(const Buffer& buffer, int src, const P2POptions& options = {},
                           const GroupPtr& group = nullptr);
std::shared_ptr<Work> isend(const Buffer& buffer, int dst, int tag = 0, const GroupPtr& group = nullptr);
std::shared_ptr<Work> irecv(const Buffer& buffer, int src, int tag = 0, const GroupPtr& group = nullptr);
std::vector<std::shared_ptr<Work>> batch_isend_irecv(const std::vector<P2POp>& ops,
                                                     const GroupPtr& group = nullptr);

// make_group builds a cohort-backend group over `store` (already namespaced
// for it) without touching the default group: the ranks-as-threads tests
// and tools use it. `master_host` picks the address to listen on (see
// COHORT_SOCKET_IFNAME); empty means loopback. `backend` is a name or a
// per-device spec as for init_process_group ("cpu:cohort,cuda:nccl").
std::shared_ptr<ProcessGroup> make_group(std::shared_ptr<Store> store, int rank, int size,
                                         std::chrono::milliseconds timeout,
                                         const std::string& name = "default",
                                         const std::string& master_host = "",
                                         const std::string& backend = "cohort");

}  // namespace cohort
