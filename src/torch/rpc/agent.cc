// agent.cc (rpc): the agent's life: the process's current agent, joining
// the other workers, the timer that times calls out, shutdown; and rpc.h's
// free functions. A call's own life is in agent_calls.cc (the caller's
// side) and agent_incoming.cc (what arrives from the other workers).
#include "torch/rpc/agent.h"

#include <atomic>
#include <string>
#include <vector>

#include "cohort/prefix_store.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "rendezvous/init_url.h"
#include "torch/rpc/dist_autograd.h"
#include "transport/tcp/connect.h"

namespace cohort::rpc {
namespace {

std::mutex& agent_mu() {
  static std::mutex mu;
  return mu;
}
std::shared_ptr<RpcAgent>& agent_slot() {
  static std::shared_ptr<RpcAgent> agent;
  return agent;
}

std::string millis(std::chrono::milliseconds t) { return std::to_string(t.count()) + " ms"; }

}  // namespace

std::shared_ptr<RpcAgent> RpcAgent::current() {
  auto agent = current_or_null();
  if (!agent) throw InvalidArgument("rpc: not initialized (call init_rpc first; shutdown ends it)");
  return agent;
}

std::shared_ptr<RpcAgent> RpcAgent::current_or_null() {
  std::lock_guard<std::mutex> lock(agent_mu());
  return agent_slot();
}

void RpcAgent::install(std::shared_ptr<RpcAgent> agent) {
  std::lock_guard<std::mutex> lock(agent_mu());
  if (agent_slot()) throw InvalidArgument("rpc: init_rpc was called already (shutdown first)");
  agent_slot() = std::move(agent);
}

void RpcAgent::uninstall() {
  std::shared_ptr<RpcAgent> gone;
  {
    std::lock_guard<std::mutex> lock(agent_mu());
    gone.swap(agent_slot());
  }
}

// ---- joining ----

RpcAgent::RpcAgent(const std::string& name, int rank, int world_size, const RpcBackendOptions& options)
    : name_(name),
      rank_(rank),
      world_size_(world_size),
      options_(options) {}

namespace {

std::chrono::milliseconds join_timeout(const RpcBackendOptions& options) {
  if (options.join_timeout.count() > 0) return options.join_timeout;
  return std::chrono::milliseconds(static_cast<int64_t>(config_float(knobs::kDefaultTimeoutS) * 1000));
}

}  // namespace

std::string RpcAgent::describe(int worker) const {
  if (worker < 0 || worker >= world_size_) return "rank " + std::to_string(worker);
  return "worker '" + names_[static_cast<size_t>(worker)] + "' (rank " + std::to_string(worker) + ")";
}

int RpcAgent::resolve(const To& to) const {
  if (!to.name.empty() || to.id < 0) {
    for (int w = 0; w < world_size_; ++w) {
      if (names_[static_cast<size_t>(w)] == to.name) return w;
    }
    std::string known;
    for (const auto& n : names_) known += (known.empty() ? "'" : ", '") + n + "'";
    throw InvalidArgument("rpc: no worker is named '" + to.name + "' (the workers are " + known + ")");
  }
  if (to.id >= world_size_) {
    throw InvalidArgument("rpc: no worker of rank " + std::to_string(to.id) + " (there are " +
                          std::to_string(world_size_) + ")");
  }
  return to.id;
}

std::chrono::milliseconds RpcAgent::effective(std::chrono::milliseconds timeout) const {
  return timeout == kDefaultTimeout ? options_.rpc_timeout : timeout;
}

RpcAgent::~RpcAgent() {
  if (!shut_down_) shutdown(false);
}

// ---- timeouts ----

void RpcAgent::timer_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (leaving_ && pending_.empty()) return;
    if (deadlines_.empty()) {
      timer_wakes_at_ = Clock::time_point::max();
      timer_cv_.wait(lock);
      continue;
    }
    const auto [when, id] = *deadlines_.begin();
    if (Clock::now() < when) {
      timer_wakes_at_ = when;
      timer_cv_.wait_until(lock, when);
      continue;
    }
    deadlines_.erase(deadlines_.begin());
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    const std::string what = it->second.what + " timed out after " + millis(it->second.timeout);
    lock.unlock();
    finish(id, IValue(), std::make_exception_ptr(TimeoutError("rpc: " + what)), -1);
    lock.lock();
  }
}

// ---- shutdown ----

bool RpcAgent::quiet() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pending_.empty()) return false;
  }
  RRefCounts c = rref_counts();
  if (c.pending_deletes || c.pending_children) return false;
  {
    std::lock_guard<std::mutex> lock(rref_mu_);
    for (const auto& [fork, user] : users_) {
      if (!user->confirmedByOwner()) return false;
    }
  }
  return pool_->idle();
}

void RpcAgent::barrier(const std::string& name, bool wait_for_all) {
  std::vector<std::string> keys;
  for (int w = 0; w < world_size_; ++w) keys.push_back("shutdown/" + name + "/" + std::to_string(w));
  store_->set(keys[static_cast<size_t>(rank_)], std::vector<uint8_t>{1});
  if (wait_for_all) store_->wait(keys, join_timeout(options_));
}

void RpcAgent::shutdown(bool graceful) {
  if (shut_down_) return;
  if (graceful) {
    delete_all_users();
    const Deadline deadline = Deadline::after(join_timeout(options_));
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      lock.unlock();
      const bool done = quiet();
      lock.lock();
      if (done) break;
      if (deadline.expired()) {
        std::string what;
        for (const auto& [id, p] : pending_) what += (what.empty() ? "" : "; ") + p.what;
        lock.unlock();
        throw TimeoutError("rpc: shutdown on " + describe(rank_) + " waited " + millis(join_timeout(options_)) +
                           " for its own work to end: " + (what.empty() ? std::string("RRef messages") : what));
      }
      quiet_cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
    lock.unlock();
    // Every worker has ended its own work: no call is in flight anywhere.
    barrier("quiet", true);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    leaving_ = true;
  }
  if (graceful) {
    // Every worker now takes the others' ends for leaving, not dying;
    // then the store's server, which may live in rank 0, goes last.
    barrier("closing", true);
    barrier("left", rank_ == 0);
  }
  if (wire_) wire_->stop();
  // What is still pending will not be answered.
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, p] : pending_) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    finish(id, IValue(), std::make_exception_ptr(NetworkError("rpc: shut down while a call was pending")), -1);
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  if (pool_) pool_->stop();
  shut_down_ = true;
  // Users still alive here can no longer tell their owners.
  std::lock_guard<std::mutex> lock(rref_mu_);
  for (auto& [fork, user] : users_) user->deleted.store(true);
  users_.clear();
}

// ---- rpc.h ----

// join meets the other workers through `store` (this meeting's prefix of
// the init method's store): names, the wire's links, the pool and the
// timer. init_rpc installs the agent once it has joined.
void RpcAgent::join(const std::shared_ptr<Store>& store, const std::string& master_host,
                    std::chrono::milliseconds timeout) {
  store_ = store;
  store_->set("name/" + std::to_string(rank_), std::vector<uint8_t>(name_.begin(), name_.end()));
  auto address = tcp::local_address(master_host);
  if (!address.ok()) throw_status(address.status().with_context("init_rpc"));
  auto wire = MessageWire::connect(*store_, rank_, world_size_, address.value(), Deadline::after(timeout));
  if (!wire.ok()) throw_status(wire.status().with_context("init_rpc of worker '" + name_ + "'"));
  wire_ = std::move(wire.value());
  std::vector<std::string> keys;
  for (int w = 0; w < world_size_; ++w) keys.push_back("name/" + std::to_string(w));
  store_->wait(keys, timeout);
  auto values = store_->multi_get(keys);
  for (int w = 0; w < world_size_; ++w) names_.emplace_back(values[w].begin(), values[w].end());
  for (int w = 0; w < world_size_; ++w) {
    for (int v = 0; v < w; ++v) {
      if (names_[w] == names_[v]) {
        throw InvalidArgument("init_rpc: ranks " + std::to_string(v) + " and " + std::to_string(w) +
                              " both took the name '" + names_[w] + "' (worker names must differ)");
      }
    }
  }
  lost_.assign(static_cast<size_t>(world_size_), Status::ok_status());
  wire_turns_.wire = wire_.get();
  pool_ = std::make_unique<ThreadPool>(options_.num_worker_threads, std::chrono::microseconds(100), &wire_turns_);
  wire_->start(this);
  timer_ = std::thread([this] { timer_loop(); });
}

void init_rpc(const std::string& name, int rank, int world_size, const RpcBackendOptions& options) {
  if (name.empty() || name.size() > 128) {
    throw InvalidArgument("init_rpc: a worker's name must have 1 to 128 characters (got " +
                          std::to_string(name.size()) + ")");
  }
  if (options.num_worker_threads < 1) {
    throw InvalidArgument("init_rpc: num_worker_threads must be at least 1 (got " +
                          std::to_string(options.num_worker_threads) + ")");
  }
  if (options.rpc_timeout.count() < 0) {
    throw InvalidArgument("init_rpc: rpc_timeout must not be negative (got " + millis(options.rpc_timeout) + ")");
  }
  if (RpcAgent::current_or_null()) throw InvalidArgument("init_rpc: rpc is initialized already (shutdown first)");
  dist_autograd::register_builtins();
  const auto timeout = join_timeout(options);
  std::shared_ptr<Store> store = options.store;
  std::string master_host;
  if (store) {
    if (rank < 0 || world_size < 1 || rank >= world_size) {
      throw InvalidArgument("init_rpc: with a store, give rank and world_size (rank " + std::to_string(rank) +
                            ", world_size " + std::to_string(world_size) + ")");
    }
  } else {
    Rendezvous rv = rendezvous(options.init_method, rank, world_size, timeout, &master_host);
    store = rv.store;
    rank = rv.rank;
    world_size = rv.world_size;
  }
  // Each init_rpc of a process is a new meeting: the keys of an earlier
  // one (same store) must not be read as this one's.
  static std::atomic<int> generation{0};
  auto rpc_store = std::make_shared<PrefixStore>("rpc/" + std::to_string(generation++), store);
  auto agent = std::make_shared<RpcAgent>(name, rank, world_size, options);
  agent->join(rpc_store, master_host, timeout);
  RpcAgent::install(agent);
  COHORT_LOG(kInfo) << "rpc: " << agent->describe(rank) << " joined " << world_size << " workers";
}

void shutdown(bool graceful) {
  auto agent = RpcAgent::current();
  // Gone from the process before it stops, so that RRefs dropped from now
  // on do not call into it.
  agent->shutdown(graceful);
  RpcAgent::uninstall();
}

bool is_initialized() { return RpcAgent::current_or_null() != nullptr; }

WorkerInfo get_worker_info(const std::string& name) {
  auto agent = RpcAgent::current();
  const int w = name.empty() ? agent->rank() : agent->resolve(To(name));
  return WorkerInfo{agent->names()[static_cast<size_t>(w)], w};
}

WorkerInfo get_worker_info(int id) {
  auto agent = RpcAgent::current();
  const int w = agent->resolve(To(id));
  return WorkerInfo{agent->names()[static_cast<size_t>(w)], w};
}

std::vector<WorkerInfo> get_worker_infos() {
  auto agent = RpcAgent::current();
  std::vector<WorkerInfo> out;
  for (int w = 0; w < agent->world_size(); ++w) out.push_back(WorkerInfo{agent->names()[static_cast<size_t>(w)], w});
  return out;
}

IValue rpc_sync(const To& to, const std::string& function, std::vector<IValue> args,
                std::chrono::milliseconds timeout) {
  auto agent = RpcAgent::current();
  return agent->call_sync(agent->resolve(to), function, std::move(args), timeout);
}

FuturePtr rpc_async(const To& to, const std::string& function, std::vector<IValue> args,
                    std::chrono::milliseconds timeout) {
  auto agent = RpcAgent::current();
  return agent->call_async(agent->resolve(to), function, std::move(args), timeout);
}

RRef remote(const To& to, const std::string& function, std::vector<IValue> args, std::chrono::milliseconds timeout) {
  auto agent = RpcAgent::current();
  return agent->make_remote(agent->resolve(to), function, std::move(args), timeout);
}

}  // namespace cohort::rpc
