// rref.cc (rpc): RRefs as torch's design notes describe them
// (docs/rpc.md): the owner keeps the value while it knows of a user; a
// user that passes its RRef on keeps it (a "pending child") until the
// owner has recorded the new user, so the owner can never see the count
// reach zero while a reference is in flight; a user's last handle tells
// the owner it is gone.
//
// Messages between two workers arrive in the order sent, which the
// protocol leans on: the owner records a remote() call's user before that
// user's deletion can arrive, and a fork request before its deletion.
#include <c10/util/intrusive_ptr.h>

#include "torch/rpc/agent.h"

namespace cohort::rpc {
namespace {

bool is_marker(const IValue& v) {
  if (!v.isTuple()) return false;
  const auto& e = fields(v);
  return e.size() == 7 && e[0].isString() && e[0].toStringRef() == kRRefMarker;
}

// take_out moves the strong references a map held out of it, so that they
// die after the lock is let go (a user's death takes that lock).
template <class T>
void drop_later(std::vector<T>& graveyard, T value) {
  graveyard.push_back(std::move(value));
}

}  // namespace

RRefImpl::RRefImpl(int owner, std::string owner_name, GlobalId rref_id, GlobalId fork_id, bool is_owner)
    : id(rref_id), fork(fork_id), owner_(owner), owner_name_(std::move(owner_name)), is_owner_(is_owner) {
  if (is_owner_) value = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get());
}

RRefImpl::~RRefImpl() {
  if (is_owner_ || deleted.load()) return;
  if (auto agent = RpcAgent::current_or_null()) agent->user_gone(*this);
}

GlobalId RpcAgent::new_id() { return GlobalId{rank_, next_local_id_.fetch_add(1)}; }

c10::intrusive_ptr<RRefImpl> RpcAgent::owner_entry(GlobalId id) {
  OwnerEntry& e = owners_[id];
  if (!e.rref) e.rref = c10::make_intrusive<RRefImpl>(rank_, name_, id, id, true);
  return e.rref;
}

IValue RpcAgent::to_wire(const IValue& v, int to, bool* had_rrefs) {
  *had_rrefs = false;
  return map_leaves(v, [&](const IValue& leaf) -> std::optional<IValue> {
    if (!leaf.isRRef()) return std::nullopt;
    auto impl = c10::dynamic_intrusive_pointer_cast<RRefImpl>(leaf.toRRef());
    if (!impl) throw InvalidArgument("rpc: an RRef that is not cohort's cannot travel");
    *had_rrefs = true;
    GlobalId fork = impl->fork;
    if (!impl->isOwner()) {
      if (to != impl->owner()) {
        // A new user: this one keeps the RRef until the owner knows it.
        fork = new_id();
        std::lock_guard<std::mutex> lock(rref_mu_);
        children_[fork] = PendingChild{impl, to};
      }
    } else {
      // The owner makes the fork and records its user at once (also for a
      // message to itself, undone when it arrives).
      fork = new_id();
      std::lock_guard<std::mutex> lock(rref_mu_);
      OwnerEntry& e = owners_[impl->id];
      if (!e.rref) e.rref = impl;
      e.forks[fork] = to;
    }
    return IValue(c10::ivalue::Tuple::create({IValue(kRRefMarker), IValue(static_cast<int64_t>(impl->owner())),
                                              IValue(impl->id.worker), IValue(impl->id.local), IValue(fork.worker),
                                              IValue(fork.local), IValue(static_cast<int64_t>(rank_))}));
  });
}

IValue RpcAgent::from_wire(const IValue& v, int from) {
  (void)from;
  return map_leaves(v, [&](const IValue& leaf) -> std::optional<IValue> {
    if (!is_marker(leaf)) return std::nullopt;
    const auto& e = fields(leaf);
    const int owner = static_cast<int>(e[1].toInt());
    const GlobalId id{e[2].toInt(), e[3].toInt()};
    const GlobalId fork{e[4].toInt(), e[5].toInt()};
    const int parent = static_cast<int>(e[6].toInt());
    if (owner == rank_) {
      c10::intrusive_ptr<RRefImpl> value;
      std::vector<c10::intrusive_ptr<RRefImpl>> graveyard;
      {
        std::lock_guard<std::mutex> lock(rref_mu_);
        value = owner_entry(id);
        if (parent == rank_) {
          // The fork made for a message to itself: the value is here.
          auto it = owners_.find(id);
          it->second.forks.erase(fork);
          if (it->second.forks.empty()) {
            drop_later(graveyard, std::move(it->second.rref));
            owners_.erase(it);
          }
        }
      }
      return IValue(c10::intrusive_ptr<c10::RRefInterface>(value));
    }
    auto user = c10::make_intrusive<RRefImpl>(owner, names_[static_cast<size_t>(owner)], id, fork, false);
    {
      std::lock_guard<std::mutex> lock(rref_mu_);
      users_[fork] = user.get();
    }
    if (parent == owner) {
      user->confirmed_.store(true);  // the owner made this fork and recorded it
    } else {
      Status st = send(owner, encode(MessageType::kForkRequest, 0,
                                     c10::ivalue::Tuple::create({IValue(id.worker), IValue(id.local),
                                                                 IValue(fork.worker), IValue(fork.local),
                                                                 IValue(static_cast<int64_t>(parent))})));
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(user->error_mu);
        user->creation_error = std::make_exception_ptr(
            NetworkError("rpc: the owner of an RRef, " + describe(owner) + ", is gone: " + st.message()));
      }
    }
    return IValue(c10::intrusive_ptr<c10::RRefInterface>(user));
  });
}

void RpcAgent::user_gone(RRefImpl& user) {
  {
    std::lock_guard<std::mutex> lock(rref_mu_);
    auto it = users_.find(user.fork);
    if (it == users_.end() || it->second != &user) return;  // another agent's, or told already
    users_.erase(it);
    ++pending_deletes_[user.owner()];
  }
  Status st = send(user.owner(), encode(MessageType::kUserDelete, 0,
                                        c10::ivalue::Tuple::create({IValue(user.id.worker), IValue(user.id.local),
                                                                    IValue(user.fork.worker), IValue(user.fork.local)})));
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(rref_mu_);
    if (--pending_deletes_[user.owner()] == 0) pending_deletes_.erase(user.owner());
  }
}

void RpcAgent::delete_all_users() {
  std::vector<RRefImpl*> users;
  {
    std::lock_guard<std::mutex> lock(rref_mu_);
    for (auto& [fork, user] : users_) users.push_back(user);
  }
  // The handles stay valid (the user code holds them); each is told once.
  for (RRefImpl* user : users) {
    user_gone(*user);
    user->deleted.store(true);
  }
}

void RpcAgent::on_rref_message(int peer, MessageType type, uint64_t id, const IValue& payload) {
  std::vector<c10::intrusive_ptr<RRefImpl>> graveyard;  // dies after the lock
  const auto& t = fields(payload);
  switch (type) {
    case MessageType::kUserDelete: {
      const GlobalId rref{t[0].toInt(), t[1].toInt()};
      const GlobalId fork{t[2].toInt(), t[3].toInt()};
      {
        std::lock_guard<std::mutex> lock(rref_mu_);
        auto it = owners_.find(rref);
        if (it != owners_.end()) {
          it->second.forks.erase(fork);
          if (it->second.forks.empty()) {
            drop_later(graveyard, std::move(it->second.rref));
            owners_.erase(it);
          }
        }
      }
      Status st = send(peer, encode(MessageType::kDeleteAck, id, IValue(c10::ivalue::Tuple::create({}))));
      (void)st;
      break;
    }
    case MessageType::kDeleteAck: {
      std::lock_guard<std::mutex> lock(rref_mu_);
      auto it = pending_deletes_.find(peer);
      if (it != pending_deletes_.end() && --it->second == 0) pending_deletes_.erase(it);
      break;
    }
    case MessageType::kForkRequest: {
      const GlobalId rref{t[0].toInt(), t[1].toInt()};
      const GlobalId fork{t[2].toInt(), t[3].toInt()};
      const int parent = static_cast<int>(t[4].toInt());
      {
        std::lock_guard<std::mutex> lock(rref_mu_);
        owner_entry(rref);
        owners_[rref].forks[fork] = peer;
      }
      auto fork_value = c10::ivalue::Tuple::create({IValue(fork.worker), IValue(fork.local)});
      Status st = send(peer, encode(MessageType::kForkAck, 0, fork_value));
      st = send(parent, encode(MessageType::kChildAccept, 0, fork_value));
      (void)st;
      break;
    }
    case MessageType::kForkAck: {
      const GlobalId fork{t[0].toInt(), t[1].toInt()};
      std::lock_guard<std::mutex> lock(rref_mu_);
      auto it = users_.find(fork);
      if (it != users_.end()) it->second->confirmed_.store(true);
      break;
    }
    case MessageType::kChildAccept: {
      const GlobalId fork{t[0].toInt(), t[1].toInt()};
      std::lock_guard<std::mutex> lock(rref_mu_);
      auto it = children_.find(fork);
      if (it != children_.end()) {
        drop_later(graveyard, std::move(it->second.rref));
        children_.erase(it);
      }
      break;
    }
    default:
      break;
  }
  quiet_cv_.notify_all();
}

void RpcAgent::forget_peer_rrefs(int peer) {
  std::vector<c10::intrusive_ptr<RRefImpl>> graveyard;
  {
    std::lock_guard<std::mutex> lock(rref_mu_);
    for (auto it = owners_.begin(); it != owners_.end();) {
      auto& forks = it->second.forks;
      for (auto f = forks.begin(); f != forks.end();) f = f->second == peer ? forks.erase(f) : std::next(f);
      if (forks.empty()) {
        drop_later(graveyard, std::move(it->second.rref));
        it = owners_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = children_.begin(); it != children_.end();) {
      if (it->second.child == peer) {
        drop_later(graveyard, std::move(it->second.rref));
        it = children_.erase(it);
      } else {
        ++it;
      }
    }
    pending_deletes_.erase(peer);
  }
  quiet_cv_.notify_all();
}

RRefCounts RpcAgent::rref_counts() {
  std::lock_guard<std::mutex> lock(rref_mu_);
  RRefCounts c;
  c.owned = owners_.size();
  for (const auto& [id, e] : owners_) c.users_known += e.forks.size();
  c.live_users = users_.size();
  c.pending_children = children_.size();
  for (const auto& [owner, n] : pending_deletes_) c.pending_deletes += n;
  return c;
}

// ---- RRef, the handle ----

namespace {
const RRefImpl& checked(const c10::intrusive_ptr<c10::RRefInterface>& impl) {
  if (!impl) throw InvalidArgument("rpc: an empty RRef");
  return static_cast<const RRefImpl&>(*impl);
}
}  // namespace

WorkerInfo RRef::owner() const { return WorkerInfo{checked(impl_).ownerName(), checked(impl_).owner()}; }
bool RRef::is_owner() const { return checked(impl_).isOwner(); }
bool RRef::confirmed_by_owner() const { return checked(impl_).confirmedByOwner(); }

IValue RRef::to_here(std::chrono::milliseconds timeout) const {
  const RRefImpl& r = checked(impl_);
  if (r.isOwner()) return local_value();
  return RpcAgent::current()->fetch(r, timeout);
}

IValue RRef::local_value() const {
  const RRefImpl& r = checked(impl_);
  if (!r.isOwner()) {
    throw InvalidArgument("rpc: local_value() of an RRef owned by worker '" + r.ownerName() +
                          "' (only its owner has the value; use to_here())");
  }
  r.value->wait();
  if (r.value->hasError()) std::rethrow_exception(r.value->exception_ptr());
  return r.value->value();
}

RRef RRef::local(IValue value) {
  auto agent = RpcAgent::current();
  const GlobalId id = agent->new_id();
  auto owner = c10::make_intrusive<RRefImpl>(agent->rank(), agent->names()[static_cast<size_t>(agent->rank())], id,
                                             id, true);
  owner->value->markCompleted(std::move(value));
  return RRef(c10::intrusive_ptr<c10::RRefInterface>(owner));
}

RRef::operator IValue() const { return IValue(impl_); }

RRef RRef::from(const IValue& v) {
  if (!v.isRRef()) throw InvalidArgument("rpc: RRef::from of a " + v.tagKind() + ", not an RRef");
  auto impl = c10::dynamic_intrusive_pointer_cast<RRefImpl>(v.toRRef());
  if (!impl) throw InvalidArgument("rpc: RRef::from of an RRef that is not cohort's");
  return RRef(v.toRRef());
}

RRefCounts rref_counts() { return RpcAgent::current()->rref_counts(); }

}  // namespace cohort::rpc
