// agent.cc (rpc): joining, calls and their answers, timeouts, lost
// workers, shutdown; and rpc.h's free functions.
#include "torch/rpc/agent.h"

#include <algorithm>
#include <unordered_map>

#include "cohort/prefix_store.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "rendezvous/init_url.h"
#include "torch/rpc/dist_autograd.h"
#include "transport/tcp/connect.h"

namespace cohort::rpc {
namespace {

struct Registered {
  Function function;
  AsyncFunction async_function;
};

std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<std::string, Registered>& registry() {
  static std::unordered_map<std::string, Registered> functions;
  return functions;
}

void register_named(const std::string& name, Registered r) {
  if (name.empty()) throw InvalidArgument("rpc: a function needs a name");
  std::lock_guard<std::mutex> lock(registry_mu());
  if (!registry().emplace(name, std::move(r)).second) {
    throw InvalidArgument("rpc: a function named '" + name + "' is registered already");
  }
}

std::mutex& agent_mu() {
  static std::mutex mu;
  return mu;
}
std::shared_ptr<RpcAgent>& agent_slot() {
  static std::shared_ptr<RpcAgent> agent;
  return agent;
}

std::string error_text(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

std::string millis(std::chrono::milliseconds t) { return std::to_string(t.count()) + " ms"; }

// find_function is the function registered as `name`; `where` names this
// worker for the error when there is none.
Registered find_function(const std::string& name, const std::string& where) {
  std::lock_guard<std::mutex> lock(registry_mu());
  auto it = registry().find(name);
  if (it == registry().end()) {
    throw InvalidArgument("rpc: no function '" + name + "' is registered on " + where +
                          " (register_function it on every worker before calling it)");
  }
  return it->second;
}

}  // namespace

void register_function(const std::string& name, Function function) {
  if (!function) throw InvalidArgument("rpc: register_function('" + name + "') was given an empty function");
  register_named(name, Registered{std::move(function), nullptr});
}

void register_async_function(const std::string& name, AsyncFunction function) {
  if (!function) throw InvalidArgument("rpc: register_async_function('" + name + "') was given an empty function");
  register_named(name, Registered{nullptr, std::move(function)});
}

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

// ---- sending and answers ----

Status RpcAgent::send(int to, OutMessage m) { return wire_->send(to, std::move(m)); }

uint64_t RpcAgent::start(int to, MessageType type, const IValue& payload, bool has_rrefs, Pending pending) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw InvalidArgument("rpc: " + pending.what + " after shutdown");
    if (!lost_[static_cast<size_t>(to)].ok()) {
      throw NetworkError("rpc: " + pending.what + ": " + lost_[static_cast<size_t>(to)].message());
    }
    id = next_id_++;
  }
  // A user's call or remote() inside a distributed autograd context always
  // carries it (torch's forced recording); the workers' own calls
  // (backward, release, the optimizer) never make it reach a worker.
  const bool user_call = (type == MessageType::kCall || type == MessageType::kRemote) &&
                         payload.isTuple() && !payload.toTupleRef().elements().empty() &&
                         payload.toTupleRef().elements()[0].isString() &&
                         payload.toTupleRef().elements()[0].toStringRef().rfind("__cohort_", 0) != 0;
  OutMessage m = encode(type, id, payload, has_rrefs, to, user_call);  // may throw InvalidArgument
  const auto timeout_at = pending.deadline;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (timeout_at != Clock::time_point::max()) deadlines_.emplace(timeout_at, id);
    pending_.emplace(id, std::move(pending));
    // The timer thread is woken only for a deadline before the one it
    // sleeps until: not once per call (a wake-up costs more than a call).
    if (timeout_at < timer_wakes_at_) {
      timer_wakes_at_ = timeout_at;
      timer_cv_.notify_one();
    }
  }
  Status st = send(to, std::move(m));
  if (!st.ok()) {
    finish(id, IValue(), std::make_exception_ptr(NetworkError("rpc: " + describe(to) + " is gone: " + st.message())),
           to);
  }
  return id;
}

void RpcAgent::finish(uint64_t id, IValue value, std::exception_ptr error, int from) {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;  // timed out, or failed, before the answer came
    if (from >= 0 && it->second.peer != from) return;  // not an answer from the worker asked
    p = std::move(it->second);
    pending_.erase(it);
    deadlines_.erase({p.deadline, id});
  }
  if (p.slot) {
    {
      std::lock_guard<std::mutex> lock(p.slot->mu);
      p.slot->value = std::move(value);
      p.slot->error = error;
      p.slot->done.store(true, std::memory_order_release);
    }
    p.slot->cv.notify_all();
  }
  if (p.rref) {
    if (error) {
      std::lock_guard<std::mutex> lock(p.rref->error_mu);
      p.rref->creation_error = error;
    } else {
      p.rref->confirmed_.store(true);
    }
  }
  if (p.future) {
    // Its callbacks may block or call again: never on the wire's thread.
    FuturePtr f = p.future;
    auto complete = [f, value = std::move(value), error]() mutable {
      if (error) {
        f->setError(error);
      } else {
        f->markCompleted(std::move(value));
      }
    };
    pool_->submit(std::move(complete));
  }
  quiet_cv_.notify_all();
}

std::exception_ptr RpcAgent::error_from(const IValue& payload) {
  const auto& t = fields(payload);
  const auto kind = static_cast<ErrorKind>(t[0].toInt());
  const std::string& message = t[1].toStringRef();
  if (kind == ErrorKind::kInvalidArgument) return std::make_exception_ptr(InvalidArgument(message));
  return std::make_exception_ptr(RemoteError(message));
}

IValue RpcAgent::wait(SyncSlot& slot) {
  if (!slot.done.load(std::memory_order_acquire)) {
    // A small call's answer comes sooner than a sleeping thread wakes:
    // wait turning the wire, so that this thread reads the answer itself.
    wire_->enter_driving();
    const auto until = Clock::now() + std::chrono::microseconds(200);
    while (!slot.done.load(std::memory_order_acquire) && Clock::now() < until) {
      if (!wire_->drive_once()) std::this_thread::yield();
    }
    // With the answer in hand this thread will likely call again at once:
    // the wire's thread is left to look by itself (within a millisecond);
    // without it, this thread is off to sleep and hands the wire back.
    wire_->leave_driving(!slot.done.load(std::memory_order_acquire));
  }
  std::unique_lock<std::mutex> lock(slot.mu);
  slot.cv.wait(lock, [&] { return slot.done.load(std::memory_order_acquire); });
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.value);
}

// send_call starts a call of `function` on `to`, answered into `p` (its
// slot or its future), with the caller's `kind` of call naming it in errors.
void RpcAgent::send_call(int to, const char* kind, const std::string& function, std::vector<IValue> args,
                         std::chrono::milliseconds timeout, Pending p) {
  p.peer = to;
  p.what = std::string(kind) + " of '" + function + "' on " + describe(to);
  const auto t = effective(timeout);
  p.timeout = t;
  if (t.count() > 0) p.deadline = Clock::now() + t;
  bool rrefs = false;
  c10::impl::GenericList list(c10::AnyType::get());
  for (auto& a : args) list.push_back(std::move(a));
  IValue wired = to_wire(IValue(list), to, &rrefs);
  start(to, MessageType::kCall, c10::ivalue::Tuple::create({IValue(function), wired}), rrefs, std::move(p));
}

IValue RpcAgent::call_sync(int to, const std::string& function, std::vector<IValue> args,
                           std::chrono::milliseconds timeout) {
  Pending p;
  p.slot = std::make_shared<SyncSlot>();
  auto slot = p.slot;
  send_call(to, "rpc_sync", function, std::move(args), timeout, std::move(p));
  return wait(*slot);
}

FuturePtr RpcAgent::call_async(int to, const std::string& function, std::vector<IValue> args,
                               std::chrono::milliseconds timeout) {
  Pending p;
  p.future = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get());
  FuturePtr future = p.future;
  send_call(to, "rpc_async", function, std::move(args), timeout, std::move(p));
  return future;
}

RRef RpcAgent::make_remote(int to, const std::string& function, std::vector<IValue> args,
                           std::chrono::milliseconds timeout) {
  c10::impl::GenericList list(c10::AnyType::get());
  for (auto& a : args) list.push_back(std::move(a));
  const GlobalId id = new_id();
  if (to == rank_) {
    // The caller owns the value: made here, on the pool.
    auto owner = c10::make_intrusive<RRefImpl>(rank_, name_, id, id, true);
    std::vector<IValue> a(list.begin(), list.end());
    auto self = shared_from_this();
    pool_->submit([self, owner, function, a] { self->make_value(owner, function, a); });
    return RRef(c10::intrusive_ptr<c10::RRefInterface>(owner));
  }
  const GlobalId fork = new_id();
  auto user = c10::make_intrusive<RRefImpl>(to, names_[static_cast<size_t>(to)], id, fork, false);
  {
    std::lock_guard<std::mutex> lock(rref_mu_);
    users_[fork] = user.get();
  }
  Pending p;
  p.peer = to;
  p.what = "remote of '" + function + "' on " + describe(to);
  p.rref = user;
  const auto t = effective(timeout);
  p.timeout = t;
  if (t.count() > 0) p.deadline = Clock::now() + t;
  bool rrefs = false;
  IValue wired = to_wire(IValue(list), to, &rrefs);
  start(to, MessageType::kRemote,
        c10::ivalue::Tuple::create({IValue(function), wired, IValue(id.worker), IValue(id.local),
                                    IValue(fork.worker), IValue(fork.local)}),
        rrefs, std::move(p));
  return RRef(c10::intrusive_ptr<c10::RRefInterface>(user));
}

IValue RpcAgent::fetch(const RRefImpl& rref, std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(const_cast<RRefImpl&>(rref).error_mu);
    if (rref.creation_error) std::rethrow_exception(rref.creation_error);
  }
  const int owner = rref.owner();
  Pending p;
  p.peer = owner;
  p.what = "to_here of an RRef owned by " + describe(owner);
  p.slot = std::make_shared<SyncSlot>();
  const auto t = effective(timeout);
  p.timeout = t;
  if (t.count() > 0) p.deadline = Clock::now() + t;
  auto slot = p.slot;
  start(owner, MessageType::kFetch, c10::ivalue::Tuple::create({IValue(rref.id.worker), IValue(rref.id.local)}),
        false, std::move(p));
  return wait(*slot);
}

void RpcAgent::reply(int peer, uint64_t id, const IValue& value) {
  bool rrefs = false;
  OutMessage m;
  try {
    IValue wired = to_wire(value, peer, &rrefs);
    m = encode(MessageType::kReply, id, wired, rrefs, peer);
  } catch (const std::exception& e) {
    return reply_error(peer, id, ErrorKind::kRemote, "the result from " + describe(rank_) + " cannot travel: " + error_text(e));
  }
  Status st = send(peer, std::move(m));
  if (!st.ok()) {
    COHORT_LOG(kDebug) << "rpc: an answer to " << describe(peer) << " was lost: " << st.message();
  }
}

void RpcAgent::reply_error(int peer, uint64_t id, ErrorKind kind, const std::string& message) {
  Status st = send(peer, encode(MessageType::kError, id,
                                c10::ivalue::Tuple::create({IValue(static_cast<int64_t>(kind)), IValue(message)})));
  if (!st.ok()) {
    COHORT_LOG(kDebug) << "rpc: an error for " << describe(peer) << " was lost: " << st.message();
  }
}

// ---- what arrives ----

Status RpcAgent::on_head(int peer, InMessage& m) {
  (void)peer;
  return prepare_body(m);
}

void RpcAgent::on_message(int peer, InMessage m) {
  const auto type = static_cast<MessageType>(m.header.type);
  const uint64_t id = m.header.id;
  switch (type) {
    case MessageType::kCall: {
      auto shared = std::make_shared<InMessage>(std::move(m));
      pool_->submit([this, peer, shared] { run_call(peer, shared); });
      return;
    }
    case MessageType::kRemote: {
      auto shared = std::make_shared<InMessage>(std::move(m));
      run_remote(peer, shared);
      return;
    }
    case MessageType::kFetch:
      run_fetch(peer, m);
      return;
    case MessageType::kReply:
    case MessageType::kError:
    case MessageType::kRemoteAck: {
      IValue value;
      std::exception_ptr error;
      try {
        value = decode(m, peer);
        if (type == MessageType::kError) {
          error = error_from(value);
          value = IValue();
        } else if (has_rrefs(m)) {
          value = from_wire(value, peer);
        }
      } catch (...) {
        error = std::current_exception();
      }
      finish(id, std::move(value), error, peer);
      return;
    }
    default:
      try {
        on_rref_message(peer, type, id, decode(m));
      } catch (const std::exception& e) {
        COHORT_LOG(kError) << "rpc: a bad RRef message from " << describe(peer) << ": " << error_text(e);
      }
      return;
  }
}

void RpcAgent::run_call(int peer, std::shared_ptr<InMessage> m) {
  const uint64_t id = m->header.id;
  std::string function = "?";
  // A call made inside a distributed autograd context runs in it.
  dist_autograd::ContextScope context(autograd_context(*m));
  try {
    IValue payload = decode(*m, peer);
    if (has_rrefs(*m)) payload = from_wire(payload, peer);
    const auto& t = fields(payload);
    function = t[0].toStringRef();
    auto list = t[1].toList();
    std::vector<IValue> args(list.begin(), list.end());
    Registered r;
    try {
      r = find_function(function, describe(rank_));
    } catch (const InvalidArgument& e) {
      return reply_error(peer, id, ErrorKind::kInvalidArgument, e.what());
    }
    if (r.function) return reply(peer, id, r.function(args));
    FuturePtr f = r.async_function(args);
    if (!f) throw InvalidArgument("the async function returned no future");
    auto self = shared_from_this();
    const int64_t in_context = dist_autograd::current_context();
    f->addCallback([self, peer, id, function, in_context](c10::ivalue::Future& done) {
      // The result, made later on another thread, is still the call's: it
      // is recorded in the call's distributed autograd context.
      dist_autograd::ContextScope context_of_call(in_context);
      if (!done.hasError()) return self->reply(peer, id, done.value());
      try {
        std::rethrow_exception(done.exception_ptr());
      } catch (const std::exception& e) {
        self->reply_error(peer, id, ErrorKind::kRemote,
                          "'" + function + "' on " + self->describe(self->rank_) + " raised: " + error_text(e));
      }
    });
  } catch (const std::exception& e) {
    reply_error(peer, id, ErrorKind::kRemote,
                "'" + function + "' on " + describe(rank_) + " raised: " + error_text(e));
  } catch (...) {
    reply_error(peer, id, ErrorKind::kRemote, "'" + function + "' on " + describe(rank_) + " raised a non-std exception");
  }
}

void RpcAgent::run_remote(int peer, std::shared_ptr<InMessage> m) {
  // On the wire's thread: the owner records the caller's fork before any
  // later message from it (a deletion) can arrive.
  IValue payload;
  try {
    payload = decode(*m);
  } catch (const std::exception& e) {
    return reply_error(peer, m->header.id, ErrorKind::kRemote, "a remote call that " + describe(rank_) +
                                                                   " cannot read: " + error_text(e));
  }
  const auto& t = fields(payload);
  const GlobalId id{t[2].toInt(), t[3].toInt()};
  const GlobalId fork{t[4].toInt(), t[5].toInt()};
  c10::intrusive_ptr<RRefImpl> owner;
  {
    std::lock_guard<std::mutex> lock(rref_mu_);
    owner = owner_entry(id);
    owners_[id].forks[fork] = peer;
  }
  Status st = send(peer, encode(MessageType::kRemoteAck, m->header.id, IValue()));
  (void)st;
  const bool rrefs = has_rrefs(*m);
  auto self = shared_from_this();
  pool_->submit([self, peer, owner, payload, rrefs] {
    const auto call = fields(payload);
    std::vector<IValue> args;
    try {
      IValue args_value = rrefs ? self->from_wire(call[1], peer) : call[1];
      auto list = args_value.toList();
      args.assign(list.begin(), list.end());
    } catch (...) {
      return owner->value->setError(std::current_exception());
    }
    self->make_value(owner, call[0].toStringRef(), std::move(args));
  });
}

void RpcAgent::make_value(const c10::intrusive_ptr<RRefImpl>& owner, const std::string& function,
                          std::vector<IValue> args) {
  try {
    const Registered r = find_function(function, describe(rank_));
    if (r.function) return owner->value->markCompleted(r.function(args));
    FuturePtr f = r.async_function(args);
    if (!f) throw InvalidArgument("the async function returned no future");
    auto self = shared_from_this();
    f->addCallback([self, owner, function](c10::ivalue::Future& done) {
      if (!done.hasError()) return owner->value->markCompleted(done.value());
      try {
        std::rethrow_exception(done.exception_ptr());
      } catch (const std::exception& e) {
        owner->value->setError(std::make_exception_ptr(
            RemoteError("'" + function + "' on " + self->describe(self->rank_) + " raised: " + error_text(e))));
      }
    });
  } catch (const InvalidArgument&) {
    owner->value->setError(std::current_exception());
  } catch (const std::exception& e) {
    owner->value->setError(std::make_exception_ptr(
        RemoteError("'" + function + "' on " + describe(rank_) + " raised: " + error_text(e))));
  }
}

void RpcAgent::run_fetch(int peer, const InMessage& m) {
  IValue payload = decode(m);
  const auto& t = fields(payload);
  const GlobalId id{t[0].toInt(), t[1].toInt()};
  c10::intrusive_ptr<RRefImpl> owner;
  {
    std::lock_guard<std::mutex> lock(rref_mu_);
    owner = owner_entry(id);
  }
  const uint64_t call = m.header.id;
  auto self = shared_from_this();
  owner->value->addCallback([self, peer, call](c10::ivalue::Future& done) {
    // Answer from the pool: the value may be made on the wire's thread
    // (already there), and encoding a large one takes a while.
    auto value = done.hasError() ? IValue() : done.value();
    std::exception_ptr error = done.hasError() ? done.exception_ptr() : nullptr;
    self->pool_->submit([self, peer, call, value, error] {
      if (!error) return self->reply(peer, call, value);
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        self->reply_error(peer, call, ErrorKind::kRemote, error_text(e));
      }
    });
  });
}

void RpcAgent::on_peer_lost(int peer, const Status& why) {
  std::vector<uint64_t> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (leaving_) return;  // every worker is leaving: ends are expected
    lost_[static_cast<size_t>(peer)] = network_error(describe(peer) + " is gone (" + why.message() + ")");
    for (const auto& [id, p] : pending_) {
      if (p.peer == peer) failed.push_back(id);
    }
  }
  COHORT_LOG(kWarning) << "rpc: " << describe(peer) << " is gone: " << why.message();
  for (uint64_t id : failed) {
    std::string what;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(id);
      if (it == pending_.end()) continue;
      what = it->second.what;
    }
    finish(id, IValue(),
           std::make_exception_ptr(NetworkError("rpc: " + what + " failed: " + describe(peer) +
                                                " is gone (" + why.message() + ")")),
           -1);
  }
  forget_peer_rrefs(peer);
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
