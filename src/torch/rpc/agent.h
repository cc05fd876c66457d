// agent.h (rpc): a worker's RPC agent: its wire to the other workers
// (transport/wire.h), the calls it waits for, the calls it runs, and the
// RRefs it owns or uses (rref.cc). rpc.h's free functions talk to the one
// agent of the process.
//
// Threads: the wire's thread reads every message and hands the calls to
// the pool (they may block), answers and RRef bookkeeping it handles at
// once; rpc_sync's answer completes its waiter from the wire thread, an
// rpc_async future is completed on the pool (its callbacks may block or
// call again); a timer thread fails calls past their deadline.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cohort/rpc.h"
#include "common/deadline.h"
#include "common/thread_pool.h"
#include "torch/rpc/message.h"
#include "transport/wire.h"

namespace cohort::rpc {

// GlobalId names an RRef or one of its forks across the job: the worker
// that made the id and its count there.
struct GlobalId {
  int64_t worker = -1;
  int64_t local = -1;
  bool operator<(const GlobalId& o) const { return worker != o.worker ? worker < o.worker : local < o.local; }
  bool operator==(const GlobalId& o) const { return worker == o.worker && local == o.local; }
  std::string str() const { return std::to_string(worker) + ":" + std::to_string(local); }
};

class RpcAgent;

// RRefImpl is both kinds of torch's RRef: the owner's (is_owner, with the
// value's future) and a user's (a fork of it, which tells the owner when
// its last handle goes).
class RRefImpl : public c10::RRefInterface {
 public:
  RRefImpl(int owner, std::string owner_name, GlobalId id, GlobalId fork, bool is_owner);
  ~RRefImpl() override;

  c10::worker_id_t owner() const override { return static_cast<c10::worker_id_t>(owner_); }
  std::string ownerName() const override { return owner_name_; }
  bool isOwner() const override { return is_owner_; }
  bool confirmedByOwner() const override { return is_owner_ || confirmed_.load(); }
  const c10::TypePtr type() const override { return c10::AnyType::get(); }

  const GlobalId id;
  const GlobalId fork;  // a user's; the id itself for the owner's
  // The owner's: completes with the value, or the error that made none.
  FuturePtr value;
  std::atomic<bool> confirmed_{false};
  // Set when shutdown already told the owner this user is gone.
  std::atomic<bool> deleted{false};
  // A user's: why the remote() that makes the value failed (its timeout,
  // its owner's death), raised by to_here.
  std::mutex error_mu;
  std::exception_ptr creation_error;

 private:
  int owner_;
  std::string owner_name_;
  bool is_owner_;
};

// The marker an RRef travels as inside a pickled value.
constexpr const char* kRRefMarker = "__cohort_rref__";

class RpcAgent : public WireHandler, public std::enable_shared_from_this<RpcAgent> {
 public:
  // current is the process's agent; InvalidArgument when init_rpc was not
  // called (or shutdown was).
  static std::shared_ptr<RpcAgent> current();
  static std::shared_ptr<RpcAgent> current_or_null();
  static void install(std::shared_ptr<RpcAgent> agent);
  static void uninstall();

  RpcAgent(const std::string& name, int rank, int world_size, const RpcBackendOptions& options);
  ~RpcAgent() override;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const std::vector<std::string>& names() const { return names_; }
  std::string describe(int worker) const;  // "worker 'w1' (rank 1)"
  int resolve(const To& to) const;         // InvalidArgument for an unknown worker
  std::chrono::milliseconds effective(std::chrono::milliseconds timeout) const;

  // Calls (agent_calls.cc; what arrives: agent_incoming.cc).
  // join: init_rpc's meeting with the other workers (see agent.cc).
  void join(const std::shared_ptr<Store>& store, const std::string& master_host, std::chrono::milliseconds timeout);
  IValue call_sync(int to, const std::string& function, std::vector<IValue> args, std::chrono::milliseconds timeout);
  FuturePtr call_async(int to, const std::string& function, std::vector<IValue> args,
                       std::chrono::milliseconds timeout);
  RRef make_remote(int to, const std::string& function, std::vector<IValue> args, std::chrono::milliseconds timeout);
  IValue fetch(const RRefImpl& rref, std::chrono::milliseconds timeout);

  void shutdown(bool graceful);

  // WireHandler
  Status on_head(int peer, InMessage& m) override;
  void on_message(int peer, InMessage m) override;
  void on_peer_lost(int peer, const Status& why) override;

  // RRefs (rref.cc).
  GlobalId new_id();
  // to_wire turns the RRefs in `v` into markers for worker `to`, making
  // forks as torch's protocol says; *had_rrefs says whether there were any.
  IValue to_wire(const IValue& v, int to, bool* had_rrefs);
  // from_wire turns the markers in a value from worker `from` into RRefs.
  IValue from_wire(const IValue& v, int from);
  void user_gone(RRefImpl& user);  // a user's last handle went
  RRefCounts rref_counts();

 private:
  friend class RRefImpl;

  // SyncSlot is what rpc_sync waits on.
  struct SyncSlot {
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<bool> done{false};
    IValue value;
    std::exception_ptr error;
  };
  // Pending is a message that waits for an answer.
  struct Pending {
    int peer = -1;
    std::string what;
    std::chrono::milliseconds timeout{0};
    Clock::time_point deadline = Clock::time_point::max();
    std::shared_ptr<SyncSlot> slot;      // rpc_sync and to_here
    FuturePtr future;                    // rpc_async
    c10::intrusive_ptr<RRefImpl> rref;   // remote(): confirmed by the answer
  };


  // agent_calls.cc
  IValue wait(SyncSlot& slot);
  uint64_t start(int to, MessageType type, const IValue& payload, bool has_rrefs, Pending pending);
  void send_call(int to, const char* kind, const std::string& function, std::vector<IValue> args,
                 std::chrono::milliseconds timeout, Pending p);
  void finish(uint64_t id, IValue value, std::exception_ptr error, int from);
  void run_call(int peer, std::shared_ptr<InMessage> m);
  void run_remote(int peer, std::shared_ptr<InMessage> m);
  // make_value runs `function` on `args` into the owner RRef's value (an
  // async function's when its future completes); what it raises becomes
  // the value's error, a RemoteError naming the function and this worker.
  void make_value(const c10::intrusive_ptr<RRefImpl>& owner, const std::string& function, std::vector<IValue> args);
  void run_fetch(int peer, const InMessage& m);
  void reply(int peer, uint64_t id, const IValue& value);
  void reply_error(int peer, uint64_t id, ErrorKind kind, const std::string& message);
  static std::exception_ptr error_from(const IValue& payload);
  void timer_loop();
  bool quiet();  // nothing pending here (graceful shutdown)
  void barrier(const std::string& name, bool wait_for_all);
  Status send(int to, OutMessage m);

  // rref.cc
  c10::intrusive_ptr<RRefImpl> owner_entry(GlobalId id);  // made on first sight
  void on_rref_message(int peer, MessageType type, uint64_t id, const IValue& payload);
  void forget_peer_rrefs(int peer);
  void delete_all_users();

  std::string name_;
  const int rank_;
  const int world_size_;
  RpcBackendOptions options_;
  std::shared_ptr<Store> store_;
  std::vector<std::string> names_;
  std::unique_ptr<MessageWire> wire_;
  // The pool's watching thread turns the wire (see MessageWire::drive_once).
  struct WireTurns : IdleWork {
    MessageWire* wire = nullptr;
    void begin() override { wire->enter_driving(); }
    bool turn() override { return wire->drive_once(); }
    void end(bool found_work) override { wire->leave_driving(!found_work); }
  };
  WireTurns wire_turns_;
  std::unique_ptr<ThreadPool> pool_;

  std::mutex mu_;
  std::condition_variable quiet_cv_;
  std::unordered_map<uint64_t, Pending> pending_;  // guarded by mu_
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;  // guarded by mu_
  std::vector<Status> lost_;                       // per worker; guarded by mu_
  uint64_t next_id_ = 1;                           // guarded by mu_
  bool stopping_ = false;                          // guarded by mu_: no new calls
  bool leaving_ = false;                           // guarded by mu_: peers' ends expected
  bool shut_down_ = false;                         // shutdown's caller's
  std::condition_variable timer_cv_;
  Clock::time_point timer_wakes_at_ = Clock::time_point::max();  // guarded by mu_
  std::thread timer_;

  // RRef bookkeeping (rref.cc), guarded by rref_mu_.
  struct OwnerEntry {
    c10::intrusive_ptr<RRefImpl> rref;
    std::map<GlobalId, int> forks;  // fork -> the worker holding it
  };
  struct PendingChild {
    c10::intrusive_ptr<RRefImpl> rref;
    int child = -1;
  };
  std::mutex rref_mu_;
  std::map<GlobalId, OwnerEntry> owners_;
  std::map<GlobalId, PendingChild> children_;
  std::map<GlobalId, RRefImpl*> users_;  // live users, by fork
  std::map<int, size_t> pending_deletes_;  // owner -> deletions not yet acknowledged
  std::atomic<int64_t> next_local_id_{1};
};

}  // namespace cohort::rpc
