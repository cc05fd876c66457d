#include "transport/wire.h"

#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "common/config_registry.h"
#include "common/logging.h"
#include "common/socket.h"
#include "common/spin.h"
#include "transport/connect_group.h"

namespace cohort {
namespace {

// A head is a message's description (a function's name, pickled arguments
// without their tensors): anything larger than this is not one.
constexpr uint64_t kMaxHeadBytes = uint64_t{1} << 30;

// A large message moves in pieces of at most this, each one published to
// the reader as soon as it is in the ring: with whole-ring writes and
// reads, writer and reader would take turns (one copies while the other
// waits) instead of copying at the same time.
constexpr size_t kPieceBytes = 256 << 10;

// While other threads drive the wire, its own thread looks this often
// whether they all left without handing it back.
constexpr int kDriversLookMs = 1;

// drain_eventfd consumes an eventfd's count, so that its next poll(2)
// sleeps until the next write.
void drain_eventfd(int fd) {
  uint64_t count;
  ssize_t ignored = ::read(fd, &count, sizeof count);
  (void)ignored;
}

size_t body_bytes(const std::vector<iovec>& body) {
  size_t n = 0;
  for (const iovec& v : body) n += v.iov_len;
  return n;
}

}  // namespace

Result<std::unique_ptr<MessageWire>> MessageWire::connect(Store& store, int rank, int size,
                                                          const std::string& address, Deadline deadline) {
  std::vector<int> ranks(static_cast<size_t>(size));
  std::iota(ranks.begin(), ranks.end(), 0);
  auto links = connect_links(store, rank, ranks, address, deadline, /*with_shared_memory=*/true,
                             /*allow_lazy=*/false);
  if (!links.ok()) return links.status();
  ConnectedLinks& l = links.value();
  std::vector<std::string> addresses(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) {
    if (l.links[q]) addresses[q] = l.links[q]->address();
  }
  return std::unique_ptr<MessageWire>(new MessageWire(rank, size, std::move(l.links), std::move(l.arena),
                                                      l.options.spin_bare, l.options.doorbell_fd,
                                                      std::move(addresses)));
}

MessageWire::MessageWire(int rank, int size, std::vector<std::unique_ptr<Link>> links,
                         std::shared_ptr<shm::Arena> arena, bool spin_bare, int doorbell_fd,
                         std::vector<std::string> addresses)
    : rank_(rank),
      size_(size),
      peers_(static_cast<size_t>(size)),
      arena_(std::move(arena)),
      spin_bare_(spin_bare),
      addresses_(std::move(addresses)),
      links_(*this, doorbell_fd),
      lost_(new std::atomic<bool>[static_cast<size_t>(size)]) {
  for (int q = 0; q < size; ++q) {
    peers_[q].link = std::move(links[q]);
    lost_[q].store(false);
  }
  links_.count_links();
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

MessageWire::~MessageWire() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::string MessageWire::peer_name(int peer) const {
  if (peer == rank_) return "rank " + std::to_string(peer) + " (this worker)";
  return "rank " + std::to_string(peer) + " (" + addresses_[static_cast<size_t>(peer)] + ")";
}

bool MessageWire::shares_memory_with(int peer) const {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  return p.link && p.link->moves_in_user_space();
}

void MessageWire::start(WireHandler* handler) {
  handler_ = handler;
  started_.store(true, std::memory_order_release);
  thread_ = std::thread([this] { run(); });
}

void MessageWire::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  ring();
  thread_.join();
  for (Peer& p : peers_) {
    if (!p.link) continue;
    std::lock_guard<std::mutex> lock(p.send_mu);
    p.link->shut_down();
    p.sends.clear();
  }
}

void MessageWire::ring() {
  const uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

MessageWire::Outgoing MessageWire::prepare(OutMessage m) {
  Outgoing out;
  out.header.type = m.type;
  out.header.id = m.id;
  out.header.head_bytes = m.head.size();
  out.header.body_bytes = body_bytes(m.body);
  out.message = std::move(m);
  return out;
}

void MessageWire::queue(int peer, OutMessage m) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  Outgoing out = prepare(std::move(m));
  bool moved = false;
  Status failure;
  {
    std::lock_guard<std::mutex> lock(p.send_mu);
    p.sends.push_back(std::move(out));
    // Written here when nothing was before it; the rest is the wire
    // thread's. A broken link is the wire thread's to report: it sees it too.
    if (p.sends.size() == 1 && !write_locked(p, peer, &moved, &failure)) {
      p.has_sends.store(true, std::memory_order_seq_cst);
    } else {
      p.has_sends.store(!p.sends.empty(), std::memory_order_seq_cst);
    }
  }
  if (p.has_sends.load(std::memory_order_seq_cst) && asleep_.load(std::memory_order_seq_cst)) ring();
}

Status MessageWire::send(int peer, OutMessage m) {
  if (peer < 0 || peer >= size_) {
    return invalid_argument("no worker of rank " + std::to_string(peer) + " (there are " +
                            std::to_string(size_) + ")");
  }
  if (peer == rank_) {
    deliver_to_self(std::move(m));
    return Status::ok_status();
  }
  if (lost_[peer].load(std::memory_order_acquire)) {
    return network_error(peer_name(peer) + " is gone: its connection ended");
  }
  queue(peer, std::move(m));
  return Status::ok_status();
}

void MessageWire::deliver_to_self(OutMessage m) {
  InMessage in;
  in.header.type = m.type;
  in.header.id = m.id;
  in.header.head_bytes = m.head.size();
  in.header.body_bytes = body_bytes(m.body);
  in.head = std::move(m.head);
  Status st = handler_->on_head(rank_, in);
  if (!st.ok()) {
    COHORT_LOG(kError) << "a message to this worker itself was refused: " << st.message();
    return;
  }
  // Gather the sender's ranges into the receiver's.
  size_t to = 0, to_off = 0;
  for (const iovec& from : m.body) {
    size_t done = 0;
    while (done < from.iov_len && to < in.body.size()) {
      const size_t n = std::min(from.iov_len - done, in.body[to].iov_len - to_off);
      std::memcpy(static_cast<uint8_t*>(in.body[to].iov_base) + to_off,
                  static_cast<const uint8_t*>(from.iov_base) + done, n);
      done += n;
      to_off += n;
      if (to_off == in.body[to].iov_len) {
        ++to;
        to_off = 0;
      }
    }
  }
  handler_->on_message(rank_, std::move(in));
}

void MessageWire::lose(int peer, const Status& why) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.lost) return;
  p.lost = true;
  lost_[peer].store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(p.send_mu);
    p.sends.clear();
    p.has_sends.store(false);
    p.link->shut_down();
  }
  p.in = Inbound{};
  COHORT_LOG(kDebug) << "rpc wire of rank " << rank_ << " lost " << peer_name(peer) << ": " << why.message();
  handler_->on_peer_lost(peer, why);
}

bool MessageWire::write_locked(Peer& p, int peer, bool* moved, Status* failure) {
  bool any = false;
  iovec iov[64];
  while (!p.sends.empty()) {
    Outgoing& o = p.sends.front();
    // The message as ranges, less what went already.
    size_t n = 0, skip = o.sent;
    size_t room = kPieceBytes;
    auto add = [&](const void* base, size_t len) {
      if (n == 64 || len == 0 || room == 0) return;
      if (skip >= len) {
        skip -= len;
        return;
      }
      const size_t take = std::min(len - skip, room);
      iov[n++] = iovec{const_cast<uint8_t*>(static_cast<const uint8_t*>(base)) + skip, take};
      room -= take;
      skip = 0;
    };
    add(&o.header, sizeof o.header);
    add(o.message.head.data(), o.message.head.size());
    for (const iovec& v : o.message.body) add(v.iov_base, v.iov_len);
    const size_t total = sizeof o.header + o.header.head_bytes + o.header.body_bytes;
    const LinkIo io = p.link->write(iov, n);
    if (io.outcome == LinkIo::Outcome::kBlocked) break;
    if (io.outcome != LinkIo::Outcome::kMoved) {
      *failure = network_error(peer_name(peer) + " is gone: writing to it failed with " +
                               std::strerror(io.error ? io.error : EPIPE));
      return false;
    }
    any = true;
    o.sent += io.bytes;
    if (o.sent == total) p.sends.pop_front();
  }
  if (any) {
    *moved = true;
    p.link->moved();
  }
  return true;
}

bool MessageWire::write_to(int peer, bool* moved) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  Status failure;
  bool ok;
  {
    std::lock_guard<std::mutex> lock(p.send_mu);
    ok = write_locked(p, peer, moved, &failure);
    p.has_sends.store(!p.sends.empty(), std::memory_order_seq_cst);
  }
  if (!ok) lose(peer, failure);
  return ok;
}

Status MessageWire::take_in(int peer, size_t n) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  Inbound& in = p.in;
  if (in.stage == 0) {
    in.header_got += n;
    if (in.header_got < sizeof(WireHeader)) return Status::ok_status();
    if (in.header.magic != kWireMagic) {
      return network_error(peer_name(peer) + " sent something that is not an RPC message");
    }
    if (in.header.head_bytes > kMaxHeadBytes) {
      return network_error(peer_name(peer) + " sent a message head of " + std::to_string(in.header.head_bytes) +
                           " bytes, more than any head can be");
    }
    in.message.header = in.header;
    in.message.head.resize(in.header.head_bytes);
    in.stage = 1;
    in.got = 0;
    n = 0;
  }
  if (in.stage == 1) {
    in.got += n;
    if (in.got < in.message.head.size()) return Status::ok_status();
    Status st = handler_->on_head(peer, in.message);
    if (!st.ok()) return st;
    auto& body = in.message.body;
    body.erase(std::remove_if(body.begin(), body.end(), [](const iovec& v) { return v.iov_len == 0; }),
               body.end());
    if (body_bytes(body) != in.header.body_bytes) {
      return network_error(peer_name(peer) + " sent a body of " + std::to_string(in.header.body_bytes) +
                           " bytes where its head describes " + std::to_string(body_bytes(body)));
    }
    in.stage = 2;
    in.got = 0;
    in.segment = 0;
    n = 0;
  }
  in.got += n;
  auto& body = in.message.body;
  if (in.segment < body.size() && in.got == body[in.segment].iov_len) {
    ++in.segment;
    in.got = 0;
  }
  if (in.segment < body.size()) return Status::ok_status();
  InMessage done = std::move(in.message);
  in = Inbound{};
  handler_->on_message(peer, std::move(done));
  return Status::ok_status();
}

bool MessageWire::read_from(int peer, bool* moved) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  bool any = false;
  for (;;) {
    Inbound& in = p.in;
    uint8_t* into;
    size_t want;
    if (in.stage == 0) {
      into = reinterpret_cast<uint8_t*>(&in.header) + in.header_got;
      want = sizeof(WireHeader) - in.header_got;
    } else if (in.stage == 1) {
      into = in.message.head.data() + in.got;
      want = in.message.head.size() - in.got;
    } else {
      const iovec& v = in.message.body[in.segment];
      into = static_cast<uint8_t*>(v.iov_base) + in.got;
      want = v.iov_len - in.got;
    }
    const LinkIo io = p.link->read(into, std::min(want, kPieceBytes));
    if (io.outcome == LinkIo::Outcome::kBlocked) break;
    if (io.outcome == LinkIo::Outcome::kEnded) {
      lose(peer, network_error(peer_name(peer) + " closed its connection (the worker exited or was killed)"));
      return false;
    }
    if (io.outcome == LinkIo::Outcome::kFailed) {
      lose(peer, network_error(peer_name(peer) + " is gone: reading from it failed with " +
                               std::strerror(io.error)));
      return false;
    }
    any = true;
    Status st = take_in(peer, io.bytes);
    if (!st.ok()) {
      lose(peer, st);
      return false;
    }
    if (p.lost) return false;
    if (io.drained) break;  // nothing more now: poll(2) says when (link.h)
  }
  if (any) {
    *moved = true;
    p.link->moved();  // room in the ring for a writer that sleeps
  }
  return true;
}

bool MessageWire::move_locked() {
  bool moved = false;
  for (int q = 0; q < size_; ++q) {
    Peer& p = peers_[q];
    if (!p.link || p.lost) continue;
    if (p.has_sends.load(std::memory_order_acquire) && !write_to(q, &moved)) continue;
    if (p.link->moves_in_user_space()) read_from(q, &moved);
  }
  return moved;
}

void MessageWire::serve_link(int q, short revents) {
  Peer& p = peers_[q];
  if (p.lost) return;
  bool became_ready = false;
  Status st = p.link->on_ready(revents, &became_ready);
  if (!st.ok()) return lose(q, st);
  // Whoever serves counts the turn as one that moved (poll(2) found
  // something), so what each call moved needs no keeping.
  bool moved = false;
  if ((revents & POLLOUT) && p.has_sends.load() && !write_to(q, &moved)) return;
  if (revents & (POLLIN | POLLERR | POLLHUP)) read_from(q, &moved);
}

bool MessageWire::drive_once() {
  if (!started_.load(std::memory_order_acquire)) return false;  // no handler yet
  std::unique_lock<std::mutex> lock(drive_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  bool moved = move_locked();
  // Shared memory moves without system calls; sockets (and the ends of
  // shared-memory peers) need poll(2), now and then when all is shared.
  if (links_.looks_this_turn(0, turn_)) {
    links_.fill(table_);
    const int rc = table_.fds.empty() ? 0 : ::poll(table_.fds.data(), table_.fds.size(), 0);
    if (rc > 0) {
      (void)links_.serve(table_);  // a rung doorbell: the next move reads it
      moved = true;
    }
  }
  return moved;
}

void MessageWire::enter_driving() {
  if (drivers_.fetch_add(1, std::memory_order_seq_cst) != 0) return;
  // The first driver reads the shared-memory rings itself: the peers need
  // not ring this process's doorbell (a system call per message) for the
  // wire's thread, which stays out of the way until the drivers leave.
  std::lock_guard<std::mutex> lock(drive_mu_);
  links_.cancel_doorbells();
}

void MessageWire::leave_driving(bool hand_back) {
  if (drivers_.fetch_sub(1, std::memory_order_seq_cst) != 1) return;
  // The last driver hands the wire back to its thread. That thread may be
  // asleep with the doorbells off (enter_driving turned them off): either
  // wake it, or, for a driver that will be back at once (a worker thread
  // off to run the call it read, a caller with its answer), only turn the
  // doorbells back on, so that whatever comes meanwhile still wakes it.
  // A thread waiting for the drivers looks by itself every kDriversLookMs.
  if (hand_back) {
    if (waiting_for_drivers_.load(std::memory_order_seq_cst) || asleep_.load(std::memory_order_seq_cst)) ring();
    return;
  }
  std::lock_guard<std::mutex> lock(drive_mu_);
  if (!asleep_.load(std::memory_order_seq_cst)) return;
  if (links_.ask_for_doorbells()) ring();
}

// The helpers below are run()'s steps, one turn of its loop each; they are
// forced inline into it so that the spinning loop pays no call for them.

[[gnu::always_inline]] inline void MessageWire::wait_out_drivers() {
  pollfd w{wake_fd_, POLLIN, 0};
  if (::poll(&w, 1, kDriversLookMs) > 0) drain_eventfd(wake_fd_);
  waiting_for_drivers_.store(false, std::memory_order_relaxed);
}

[[gnu::always_inline]] inline bool MessageWire::announce_sleep() {
  // Said before the last look at the queues: a sender either finds this
  // flag set and rings, or its queue is seen here. The shared-memory
  // peers are asked for a doorbell by the look that sleeps (link_loop.h).
  asleep_.store(true, std::memory_order_seq_cst);
  bool stay_awake = false;
  for (const Peer& p : peers_) {
    if (p.has_sends.load(std::memory_order_seq_cst)) stay_awake = true;
  }
  if (stop_.load(std::memory_order_acquire) || drivers_.load() > 0) stay_awake = true;
  return !stay_awake;
}

void MessageWire::run() {
  const auto budget =
      std::chrono::microseconds(std::max<int64_t>(0, config_int(knobs::kTcpSpinUs)));
  // A permit to spin is taken for each busy spell and given back before a
  // sleep: a wire that idles for minutes must not keep the process's
  // collectives from spinning.
  auto permit = std::make_unique<SpinPermit>();
  QuietSpell spell(permit->granted() ? budget : std::chrono::microseconds(0), spin_bare_);
  Clock::time_point now = Clock::now();
  spell.restart(now);
  // start_spell takes a new permit and starts a quiet spell of up to
  // `spin` (none without the permit) from now.
  auto start_spell = [&](std::chrono::microseconds spin, bool bare) {
    now = Clock::now();
    permit = std::make_unique<SpinPermit>();
    spell = QuietSpell(permit->granted() ? spin : std::chrono::microseconds(0), bare);
    spell.restart(now);
  };
  // This thread's own table: it polls it with the wire let go, while a
  // driver may be using the shared one.
  PollTable table;
  while (!stop_.load(std::memory_order_acquire)) {
    // Another thread of this process drives the wire (a caller waiting for
    // its answer, an idle worker thread): it reads what comes and runs it
    // with no hand-off, so this thread stays out of its way until the last
    // one leaves (which rings), looking now and then all the same.
    waiting_for_drivers_.store(true, std::memory_order_seq_cst);
    if (drivers_.load(std::memory_order_seq_cst) > 0) {
      permit.reset();
      wait_out_drivers();
      // Back on duty: one look, then asleep (doorbells asked for) unless
      // something moves; spinning here would take a core from the drivers
      // that come and go.
      start_spell(std::chrono::microseconds(0), false);
      continue;
    }
    waiting_for_drivers_.store(false, std::memory_order_relaxed);
    std::unique_lock<std::mutex> lock(drive_mu_);
    bool moved = move_locked();
    if (moved) spell.restart(now);
    links_.fill(table);
    table.fds.push_back(pollfd{wake_fd_, POLLIN, 0});
    const QuietSpell::Phase phase = spell.phase(now);
    int timeout = phase == QuietSpell::Phase::kSleep ? -1 : 0;
    if (timeout != 0) {
      if (!announce_sleep()) timeout = 0;
      if (timeout != 0) permit.reset();
    }
    const auto seen = links_.look(table, timeout, turn_, [&lock](pollfd* fds, nfds_t count, int ms) {
      if (ms == 0) return ::poll(fds, count, 0);
      // Asleep without the wire: a thread that comes to drive it may.
      lock.unlock();
      const int rc = ::poll(fds, count, ms);
      lock.lock();
      return rc;
    });
    const int rc = seen.rc;
    // Senders read the flag on every send: write it only when it changes.
    if (asleep_.load(std::memory_order_relaxed)) asleep_.store(false, std::memory_order_relaxed);
    if (!permit) start_spell(budget, spin_bare_);
    if (rc < 0 && seen.error != EINTR) {
      COHORT_LOG(kError) << "rpc wire: poll failed: " << std::strerror(seen.error);
      continue;
    }
    if (rc > 0) {
      if (table.fds.back().revents) drain_eventfd(wake_fd_);
      (void)links_.serve(table);  // a rung doorbell: the next move reads it
      spell.restart(now);
    }
    lock.unlock();
    if (rc == 0 && !seen.slept && phase != QuietSpell::Phase::kBareSpin) sched_yield();
    now = Clock::now();
  }
}

}  // namespace cohort
