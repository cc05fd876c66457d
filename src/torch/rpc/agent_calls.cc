// agent_calls.cc (rpc): the caller's side of a call. rpc_sync, rpc_async,
// remote() and to_here start one (a Pending that waits for its answer);
// finish() hands what ends it (the answer, an error, a timeout, a lost
// worker, shutdown) to whoever waits: a SyncSlot, a future or an RRef.
#include "torch/rpc/agent.h"

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace cohort::rpc {

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

}  // namespace cohort::rpc
