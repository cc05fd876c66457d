// agent_incoming.cc (rpc): what arrives from the other workers (the wire's
// handler, and the function registry it runs calls against): calls run on
// the pool, remote() values made, fetches answered once the value is
// there, answers to this worker's calls handed to finish(), lost workers.
#include "torch/rpc/agent.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/logging.h"
#include "torch/rpc/dist_autograd.h"

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

std::string error_text(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

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

// ---- answers to the others' calls ----

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

}  // namespace cohort::rpc
