// rpc.h: remote procedure calls between the processes of a job, after
// torch.distributed.rpc, for libtorch programs: call a function on another
// worker, hold a reference to a value that lives there (RRef), and fail
// cleanly when that worker dies.
//
//   cohort::rpc::register_function("add", [](const std::vector<c10::IValue>& a) {
//     return c10::IValue(a[0].toTensor() + a[1].toTensor());
//   });                                                   // on every worker, before init_rpc
//   cohort::rpc::init_rpc("worker" + std::to_string(rank), rank, world_size);
//   auto sum = cohort::rpc::rpc_sync("worker1", "add", {torch::ones(2), torch::ones(2)}).toTensor();
//   auto fut = cohort::rpc::rpc_async("worker1", "add", {x, y});   // a c10::ivalue::Future
//   cohort::rpc::RRef r = cohort::rpc::remote("worker1", "add", {x, y});
//   auto value = r.to_here().toTensor();
//   cohort::rpc::shutdown();                              // waits for every worker's work
//
// C++ cannot pickle a callable, so functions are registered by name on
// every worker and called by name. Arguments and results are IValues:
// tensors, scalars, strings, lists, dicts, tuples, None, and RRefs (an RRef
// converts to an IValue; RRef::from reads it back). Tensors travel as
// their bytes, straight from their storage into the receiver's new tensor
// (a contiguous copy is made first only of a tensor that is not
// contiguous); the rest is pickled as torch's RPC pickles it.
//
// Workers meet through a store (init_method env://, tcp://, file://, or a
// store given), as process groups do, and connect to every other worker:
// shared memory with those on the same host, TCP with the others. Each
// worker runs one thread for its connections and num_worker_threads for
// the functions it is asked to run.
//
// Errors: a function that throws on the callee raises cohort::RemoteError
// on the caller, with the callee's message, function and worker; a call
// past its timeout raises TimeoutError; a worker that dies (its process
// killed) fails every call and to_here waiting on it, on every other
// worker, with NetworkError naming it, as soon as its connections end.
//
// RRefs follow torch's design (docs/rpc.md): one owner holds the value,
// users hold references; the owner learns of every user (also of a user
// made by passing an RRef on to a third worker) before the value can be
// deleted, and deletes it when the last user is gone.
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/rref_interface.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/errors.h"
#include "cohort/store.h"

namespace cohort {

// RemoteError: the function called on another worker threw; the message
// says which function, on which worker, and what it raised.
class RemoteError : public Error {
 public:
  using Error::Error;
};

namespace rpc {

using c10::IValue;
using FuturePtr = c10::intrusive_ptr<c10::ivalue::Future>;

// kDefaultTimeout stands for the agent's rpc_timeout (torch's
// UNSET_RPC_TIMEOUT); a timeout of zero waits forever (as torch).
constexpr std::chrono::milliseconds kDefaultTimeout{-1};

struct RpcBackendOptions {
  int num_worker_threads = 16;                  // threads that run the calls this worker receives
  std::chrono::milliseconds rpc_timeout{60000};  // every call's, unless given; 0: none
  std::string init_method = "env://";           // env://, tcp://host:port, file:///path
  std::shared_ptr<Store> store;                 // instead of init_method
  // How long init_rpc waits for every worker, and graceful shutdown for
  // every worker's work (0: COHORT_TIMEOUT_S).
  std::chrono::milliseconds join_timeout{0};
};

struct WorkerInfo {
  std::string name;
  int id = -1;  // the worker's rank
};

// A registered function: takes the caller's arguments, returns the result
// (IValue() for None). What it throws reaches the caller as RemoteError.
using Function = std::function<IValue(const std::vector<IValue>& args)>;
// An async function (torch's @rpc.functions.async_execution) returns a
// future instead of a value: the worker thread is free while the future
// completes, and the caller gets its value (or error) when it does.
using AsyncFunction = std::function<FuturePtr(const std::vector<IValue>& args)>;

// register_function and register_async_function make `name` callable on
// this worker. Register the same names on every worker that may be
// called, before init_rpc or at least before the first call. A name
// registered twice is an InvalidArgument.
void register_function(const std::string& name, Function function);
void register_async_function(const std::string& name, AsyncFunction function);

// init_rpc joins the job as worker `name` (unique, at most 128 bytes),
// rank and world size from the arguments or the init method (RANK,
// WORLD_SIZE). Returns when every worker has joined; TimeoutError lists
// those that did not. Throws InvalidArgument for a name taken by another
// worker, and when already initialized.
void init_rpc(const std::string& name, int rank = -1, int world_size = -1, const RpcBackendOptions& options = {});

// shutdown(graceful = true) waits until no worker has work outstanding
// (calls in flight, RRefs not yet confirmed or deleted: this worker's
// users are deleted now), then leaves with every worker. A call made
// after it raises InvalidArgument. shutdown(false) leaves at once: what
// was pending fails.
void shutdown(bool graceful = true);
bool is_initialized();

// get_worker_info: by name ("" for this worker) or by rank.
// InvalidArgument for a name or rank that is not a worker.
WorkerInfo get_worker_info(const std::string& name = "");
WorkerInfo get_worker_info(int id);
std::vector<WorkerInfo> get_worker_infos();

// To names a destination: a worker's name, a WorkerInfo, or a rank.
struct To {
  To(const std::string& worker_name) : name(worker_name) {}
  To(const char* worker_name) : name(worker_name) {}
  To(const WorkerInfo& info) : id(info.id) {}
  To(int rank) : id(rank) {}
  std::string name;
  int id = -1;
};

class RRef;

// rpc_sync runs `function` on `to` and returns its result. Raises
// RemoteError, TimeoutError, NetworkError (the worker is gone) or
// InvalidArgument (an unknown worker or function).
IValue rpc_sync(const To& to, const std::string& function, std::vector<IValue> args = {},
                std::chrono::milliseconds timeout = kDefaultTimeout);
// rpc_async starts the call and returns its future (then, wait, value;
// value() raises what rpc_sync would).
FuturePtr rpc_async(const To& to, const std::string& function, std::vector<IValue> args = {},
                    std::chrono::milliseconds timeout = kDefaultTimeout);
// remote runs `function` on `to` and returns a reference to its result,
// which stays there. Returns at once.
RRef remote(const To& to, const std::string& function, std::vector<IValue> args = {},
            std::chrono::milliseconds timeout = kDefaultTimeout);

// RRef: a reference to a value owned by one worker. Copies share one
// reference; the owner is told when this worker's last copy goes.
class RRef {
 public:
  RRef() = default;
  // local makes this worker the owner of `value` (torch's RRef(value)):
  // an RRef to pass to other workers. InvalidArgument before init_rpc.
  static RRef local(IValue value);
  // (cohort's own RRefs only: what RRef::from accepts)
  explicit RRef(c10::intrusive_ptr<c10::RRefInterface> impl) : impl_(std::move(impl)) {}

  WorkerInfo owner() const;
  bool is_owner() const;
  // confirmed_by_owner: true on the owner, and on a user once the owner
  // has recorded it.
  bool confirmed_by_owner() const;
  // to_here fetches a copy of the value (waits for it on the owner).
  // Raises what the function that makes the value raised.
  IValue to_here(std::chrono::milliseconds timeout = kDefaultTimeout) const;
  // local_value is the value itself, on the owner only (InvalidArgument
  // elsewhere); waits until it is made.
  IValue local_value() const;

  // An RRef is an IValue (to pass it to rpc_sync and friends, or return
  // it from a function); from() reads one back, InvalidArgument if `v` is
  // not an RRef.
  operator IValue() const;
  static RRef from(const IValue& v);

  const c10::intrusive_ptr<c10::RRefInterface>& impl() const { return impl_; }

 private:
  c10::intrusive_ptr<c10::RRefInterface> impl_;
};

// RRefCounts: this worker's RRef bookkeeping, for tests and debugging.
struct RRefCounts {
  size_t owned = 0;             // values this worker owns and keeps for users
  size_t users_known = 0;       // users of those values this worker knows of
  size_t live_users = 0;        // user RRefs alive here
  size_t pending_children = 0;  // RRefs passed on, not yet confirmed by their owner
  size_t pending_deletes = 0;   // deletions sent, not yet acknowledged
};
RRefCounts rref_counts();

}  // namespace rpc
}  // namespace cohort
