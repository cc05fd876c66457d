#include "transport/tcp/transport.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/config_registry.h"
#include "common/logging.h"
#include "common/point_of_view.h"
#include "common/spin.h"

namespace cohort::tcp {
namespace {

constexpr uint32_t kFrameMagic = 0x31544843;  // "CHT1"

Status desync(std::string m) {
  return Status(StatusCode::kDesync, std::move(m));
}

std::string describe_tag(uint32_t kind, uint64_t tag) {
  if (kind == static_cast<uint32_t>(MessageKind::kCollective)) {
    return "collective #" + std::to_string(tag >> 24) + " step " + std::to_string(tag & 0xFFFFFF);
  }
  if (kind == static_cast<uint32_t>(MessageKind::kFingerprint)) {
    return "the fingerprint of collective #" + std::to_string(tag);
  }
  return "point-to-point tag " + std::to_string(static_cast<int64_t>(tag));
}

// sizes_differ is the desync of a message whose size is not the one its
// receive expects, in the same words wherever the engine finds it.
Status sizes_differ(const std::string& peer, size_t sent, size_t expected, const std::string& what,
                    uint32_t kind, uint64_t tag) {
  return desync(peer + " sent " + std::to_string(sent) + " bytes but this rank expected " +
                std::to_string(expected) + " in " + what + " (" + describe_tag(kind, tag) +
                "): sizes differ between ranks");
}

}  // namespace

TcpTransport::TcpTransport(int rank, int size, std::vector<Socket> sockets,
                           std::vector<std::string> addresses)
    : rank_(rank),
      size_(size),
      peers_(static_cast<size_t>(size)),
      lost_(new std::atomic<bool>[static_cast<size_t>(size)]()) {
  for (int q = 0; q < size; ++q) {
    peers_[q].socket = std::move(sockets[q]);
    peers_[q].address = addresses[q];
  }
  spin_us_ = static_cast<size_t>(std::max<int64_t>(0, config_int(knobs::kTcpSpinUs)));
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

TcpTransport::~TcpTransport() {
  // A group going away is not a failure its peers must hear about: only
  // complete what is still pending here; the sockets then close normally.
  if (pending_ > 0) {
    fail(Status(StatusCode::kNetworkError, "the group was destroyed with this operation pending"), false);
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::string TcpTransport::peer_name(int peer) const {
  if (peer < 0 || peer >= size_) return "rank " + std::to_string(peer);
  return "rank " + std::to_string(peer) + " (" + peers_[peer].address + ")";
}

Status TcpTransport::lost(int q, Status why) {
  // Only while this rank is healthy: once it failed, it shut its own
  // sockets down, and what it reads afterwards says nothing of the peer.
  if (failed_.ok() && !interrupted_.load()) lost_[q].store(true);
  return why;
}

std::vector<int> TcpTransport::lost_peers() const {
  std::vector<int> out;
  for (int q = 0; q < size_; ++q) {
    if (lost_[q].load()) out.push_back(q);
  }
  return out;
}

void TcpTransport::wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

void TcpTransport::interrupt(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(interrupt_mu_);
    if (interrupted_) return;
    interrupt_reason_ = reason;
    interrupted_ = true;
  }
  wake();
}

// A lazy transport also has its listener to serve: peers may connect to it
// while this rank's worker has nothing else to do.
bool TcpTransport::has_pending() const {
  return pending_ > 0 || listener_.valid();
}

void TcpTransport::check_interrupt() {
  if (!interrupted_.load() || !failed_.ok()) return;
  Status reason;
  {
    std::lock_guard<std::mutex> lock(interrupt_mu_);
    reason = interrupt_reason_;
  }
  fail(reason);  // outside the lock: a completion may call interrupt() again
}

void TcpTransport::fail(const Status& status, bool tell_peers) {
  if (failed_.ok() && !tell_peers) failed_ = status;
  if (failed_.ok()) {
    failed_ = status;
    // Tell every peer why (best effort, only where no message is half
    // sent), then drop every connection, so that the other ranks fail at
    // once with the root cause instead of waiting for their timeout.
    // Relayed failures keep naming the rank that saw the cause first.
    // In words any rank can read ("this rank" is this one's number).
    std::string text = as_said_by(status.message(), rank_);
    if (text.find("(reported by rank ") == std::string::npos)
      text += " (reported by rank " + std::to_string(rank_) + ")";
    std::vector<uint8_t> body(1 + text.size());
    body[0] = static_cast<uint8_t>(status.code());
    std::memcpy(body.data() + 1, text.data(), text.size());
    Header h{kFrameMagic, static_cast<uint32_t>(MessageKind::kFailure), 0, body.size()};
    std::vector<uint8_t> frame(sizeof h + body.size());
    std::memcpy(frame.data(), &h, sizeof h);
    std::memcpy(frame.data() + sizeof h, body.data(), body.size());
    const Deadline report_deadline = Deadline::after(std::chrono::milliseconds(100));
    for (int q = 0; q < size_; ++q) {
      Peer& p = peers_[q];
      if (!p.socket.valid()) continue;
      // A message half sent over TCP is finished first (the peer is most
      // likely reading it: it waits for this rank), so that the report can
      // follow; otherwise the peer would see the connection end mid-message
      // and take this rank, not the cause, for dead.
      if (p.closed.ok() && p.link == Link::kReady && !p.uses_shm() && !p.sends.empty() &&
          p.sends.front().sent > 0) {
        finish_half_sent(q, report_deadline);
      }
      // Whole or not at all: a cut-off frame would only confuse the peer.
      const bool between_messages = p.sends.empty() || p.sends.front().sent == 0 ||
                                    p.sends.front().sent == sizeof(Header) + p.sends.front().bytes;
      if (p.closed.ok() && p.link == Link::kReady && between_messages) {
        if (p.uses_shm()) {
          if (p.out_ring.room() >= frame.size()) {
            iovec iov{frame.data(), frame.size()};
            p.out_ring.write(&iov, 1);
          }
        } else {
          send_all(p.socket.fd(), frame.data(), frame.size(),
                   Deadline::after(std::chrono::milliseconds(100)));
        }
      }
      // A same-host peer learns of the frame (or the failure) from the
      // socket's end, and then reads its ring to the end.
      ::shutdown(p.socket.fd(), SHUT_RDWR);
    }
  }
  // Complete everything still pending, exactly once each.
  auto recvs = std::move(recvs_);
  recvs_.clear();
  for (auto& r : recvs) r->done(failed_, -1);
  for (auto& p : peers_) {
    if (p.body_recv) {
      auto r = std::move(p.body_recv);
      r->done(failed_, -1);
    }
    auto sends = std::move(p.sends);
    p.sends.clear();
    for (auto& s : sends) s.done(failed_, -1);
  }
  pending_ = 0;
}

void TcpTransport::finish_half_sent(int q, Deadline deadline) {
  Peer& p = peers_[q];
  OutgoingSend& s = p.sends.front();
  const size_t header_bytes = sizeof(Header);
  if (s.sent < header_bytes) {
    const auto* header = reinterpret_cast<const uint8_t*>(&s.header);
    if (!send_all(p.socket.fd(), header + s.sent, header_bytes - s.sent, deadline).ok()) return;
    s.sent = header_bytes;
  }
  const size_t off = s.sent - header_bytes;
  if (!send_all(p.socket.fd(), s.data + off, s.bytes - off, deadline).ok()) return;
  // Sent whole (it completes below with the failure, like the rest).
  s.sent = header_bytes + s.bytes;
}

Status TcpTransport::take_unexpected(PostedRecv* pr, bool* matched) {
  *matched = false;
  RecvRequest& r = pr->request;
  for (int q = 0; q < size_; ++q) {
    if (r.peer != kAnySource && r.peer != q) continue;
    auto& queue = peers_[q].unexpected;
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->kind != r.kind) continue;
      if (it->tag != r.tag) {
        if (r.kind == MessageKind::kCollective && (it->tag >> 24) != (r.tag >> 24)) {
          return desync(peer_name(q) + " sent " + describe_tag(static_cast<uint32_t>(it->kind), it->tag) +
                        " while this rank expected " + describe_tag(static_cast<uint32_t>(r.kind), r.tag) +
                        " in " + *pr->what +
                        ": the ranks called different collectives (or in another order)");
        }
        continue;
      }
      if (it->size != r.bytes) {
        return sizes_differ(peer_name(q), it->size, r.bytes, *pr->what, static_cast<uint32_t>(r.kind), r.tag);
      }
      if (r.bytes) std::memcpy(r.data, it->data.get(), r.bytes);
      give_back(std::move(it->data), it->capacity);
      queue.erase(it);
      *matched = true;
      r.source = q;
      return Status::ok_status();
    }
  }
  return Status::ok_status();
}

void TcpTransport::post_recv(const RecvRequest& recv, Deadline deadline, const std::string* what,
                             Completion done) {
  check_interrupt();
  if (!failed_.ok()) return done(failed_, -1);
  auto pr = std::make_unique<PostedRecv>(PostedRecv{recv, deadline, what, std::move(done)});
  bool matched = false;
  Status st = take_unexpected(pr.get(), &matched);
  if (!st.ok()) {
    pr->done(st, -1);
    return fail(st);
  }
  if (matched) return pr->done(Status::ok_status(), pr->request.source);
  ++pending_;
  // The message may be arriving right now, into an unexpected buffer (its
  // header came before this receive was posted): move what came so far into
  // the receive buffer and let the rest land there directly.
  for (int q = 0; q < size_; ++q) {
    Peer& p = peers_[q];
    if (!p.in_body || !p.body_unexpected) continue;
    RecvRequest& r = pr->request;
    if ((r.peer != q && r.peer != kAnySource) || p.body_unexpected->kind != r.kind) continue;
    if (p.body_unexpected->tag != r.tag) continue;
    if (p.header.bytes != r.bytes) {
      Status mismatch = sizes_differ(peer_name(q), p.header.bytes, r.bytes, *pr->what,
                                     static_cast<uint32_t>(r.kind), r.tag);
      recvs_.push_back(std::move(pr));
      return fail(mismatch);
    }
    if (p.body_got) std::memcpy(r.data, p.body_unexpected->data.get(), p.body_got);
    p.body = static_cast<uint8_t*>(r.data);
    give_back(std::move(p.body_unexpected->data), p.body_unexpected->capacity);
    p.body_unexpected.reset();
    p.body_recv = std::move(pr);
    return;
  }
  const int from = pr->request.peer;
  if (from != kAnySource && !peers_[from].closed.ok()) {
    Status why = unmatched_tag(*pr);
    if (why.ok()) why = peers_[from].closed;
    recvs_.push_back(std::move(pr));
    return fail(why);
  }
  recvs_.push_back(std::move(pr));
}

void TcpTransport::post_send(const SendRequest& send, Deadline deadline, const std::string* what,
                             Completion done) {
  check_interrupt();
  if (!failed_.ok()) return done(failed_, -1);
  if (!peers_[send.peer].closed.ok()) {
    Status why = peers_[send.peer].closed;
    done(why, -1);
    return fail(why);
  }
  OutgoingSend out{Header{kFrameMagic, static_cast<uint32_t>(send.kind), send.tag, send.bytes},
                   static_cast<const uint8_t*>(send.data),
                   send.bytes,
                   0,
                   deadline,
                   what,
                   std::move(done)};
  peers_[send.peer].sends.push_back(std::move(out));
  ++pending_;
  if (peers_[send.peer].link == Link::kIdle) start_link(send.peer, deadline);
  // Try at once: most sends fit in the socket buffer and finish here.
  if (peers_[send.peer].link == Link::kReady && peers_[send.peer].sends.size() == 1) {
    Status st = write_to(send.peer);
    if (!st.ok()) fail(st);
  }
}

Status TcpTransport::start_body(int q) {
  Peer& p = peers_[q];
  const Header& h = p.header;
  if (h.magic != kFrameMagic) {
    return desync("received a corrupt frame from " + peer_name(q) + " (bad magic)");
  }
  auto match = recvs_.end();
  for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
    const RecvRequest& r = (*it)->request;
    if (static_cast<uint32_t>(r.kind) != h.kind || (r.peer != q && r.peer != kAnySource)) continue;
    if (r.tag == h.tag) {
      match = it;
      break;
    }
  }
  if (match == recvs_.end() && h.kind == static_cast<uint32_t>(MessageKind::kCollective)) {
    for (const auto& pr : recvs_) {
      const RecvRequest& r = pr->request;
      // Messages between two ranks keep their order, so a message of
      // another collective (its sequence number is in the tag's high bits)
      // from a rank we await means the ranks run different collectives.
      // Another step of the same one is only early: it waits aside.
      if (r.kind == MessageKind::kCollective && r.peer == q && (r.tag >> 24) != (h.tag >> 24)) {
        return desync(peer_name(q) + " sent " + describe_tag(h.kind, h.tag) + " while this rank expected " +
                      describe_tag(h.kind, r.tag) + " in " + *pr->what +
                      ": the ranks called different collectives (or in another order)");
      }
    }
  }
  if (match != recvs_.end() && (*match)->request.bytes != h.bytes) {
    return sizes_differ(peer_name(q), h.bytes, (*match)->request.bytes, *(*match)->what, h.kind, h.tag);
  }
  p.in_body = true;
  p.body_got = 0;
  if (match != recvs_.end()) {
    p.body_recv = std::move(*match);
    recvs_.erase(match);
    p.body = static_cast<uint8_t*>(p.body_recv->request.data);
  } else {
    p.body_unexpected = std::make_unique<Unexpected>();
    p.body_unexpected->kind = static_cast<MessageKind>(h.kind);
    p.body_unexpected->tag = h.tag;
    p.body_unexpected->size = h.bytes;
    p.body_unexpected->data = take_buffer(h.bytes, &p.body_unexpected->capacity);
    p.body = p.body_unexpected->data.get();
  }
  if (h.bytes == 0) finish_body(q);
  return Status::ok_status();
}

void TcpTransport::finish_body(int q) {
  Peer& p = peers_[q];
  p.in_body = false;
  p.header_got = 0;
  if (p.body_recv) {
    auto r = std::move(p.body_recv);
    --pending_;
    r->done(Status::ok_status(), q);
  } else if (p.body_unexpected->kind == MessageKind::kFailure) {
    // A peer failed and says why: fail the same way, naming the cause.
    const uint8_t* b = p.body_unexpected->data.get();
    const size_t n = p.body_unexpected->size;
    StatusCode code = n == 0 ? StatusCode::kNetworkError : static_cast<StatusCode>(b[0]);
    if (code != StatusCode::kTimeout && code != StatusCode::kDesync) code = StatusCode::kNetworkError;
    std::string text =
        n > 1 ? as_read_by(std::string(reinterpret_cast<const char*>(b) + 1, n - 1), rank_) : "a peer failed";
    // What this rank itself was waiting for helps find the rank at the end
    // of the chain (rank 0 waits for 2, which waits for the silent 1).
    const std::string owed = owed_peers();
    if (!owed.empty()) text += "; rank " + std::to_string(rank_) + " was itself " + owed;
    p.body_unexpected.reset();
    p.closed = Status(code, text);
    fail(p.closed);
  } else {
    p.unexpected.push_back(std::move(*p.body_unexpected));
    p.body_unexpected.reset();
  }
}

std::unique_ptr<uint8_t[]> TcpTransport::take_buffer(size_t n, size_t* capacity) {
  size_t best = spare_.size();
  for (size_t i = 0; i < spare_.size(); ++i) {
    if (spare_[i].first >= n && (best == spare_.size() || spare_[i].first < spare_[best].first)) best = i;
  }
  if (best < spare_.size()) {
    *capacity = spare_[best].first;
    auto buffer = std::move(spare_[best].second);
    spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(best));
    return buffer;
  }
  *capacity = std::max<size_t>(n, 1);
  return std::unique_ptr<uint8_t[]>(new uint8_t[*capacity]);  // not zero-filled
}

void TcpTransport::give_back(std::unique_ptr<uint8_t[]> buffer, size_t capacity) {
  constexpr size_t kMaxSpare = 32;
  if (buffer && spare_.size() < kMaxSpare) spare_.emplace_back(capacity, std::move(buffer));
}

Status TcpTransport::read_from(int q) {
  Peer& p = peers_[q];
  bool consumed = false;
  for (;;) {
    void* dst;
    size_t want;
    if (!p.in_body) {
      dst = reinterpret_cast<uint8_t*>(&p.header) + p.header_got;
      want = sizeof(Header) - p.header_got;
    } else {
      dst = p.body + p.body_got;
      want = p.header.bytes - p.body_got;
    }
    ssize_t n;
    if (p.uses_shm()) {
      n = failed_.ok() ? static_cast<ssize_t>(p.in_ring.read(dst, want)) : 0;
      if (n == 0) {
        // The peer may be waiting for room to write more.
        if (consumed) ring_doorbell(q);
        return Status::ok_status();
      }
      consumed = true;
      ++shm_moves_;
    } else {
      n = ::recv(p.socket.fd(), dst, want, MSG_DONTWAIT);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok_status();
      return lost(q, network_error(peer_name(q) + " is gone: receiving failed with " + std::strerror(errno) +
                                   " (the peer process probably died)"));
    }
    if (n == 0) {
      Status gone = lost(
          q, network_error(peer_name(q) + " closed its connection (the peer process exited or was killed)"));
      if (p.in_body || p.header_got > 0) return gone;  // in the middle of a message
      peer_closed(q, gone);
      return Status::ok_status();
    }
    if (!p.in_body) {
      p.header_got += static_cast<size_t>(n);
      if (p.header_got < sizeof(Header)) continue;
      Status st = start_body(q);
      if (!st.ok()) return st;
    } else {
      p.body_got += static_cast<size_t>(n);
      if (p.body_got == p.header.bytes) {
        finish_body(q);
        // Between messages, keep this rank's own sends moving: a long run of
        // receives (each maybe reduced on arrival) would otherwise starve the
        // peer, who waits for what this rank has to send.
        if (has_queued_sends()) {
          Status st = write_queued();
          if (!st.ok()) return st;
        }
      }
    }
  }
}

void TcpTransport::peer_closed(int q, Status why) {
  Peer& p = peers_[q];
  p.closed = why;
  bool needed = !p.sends.empty();
  for (const auto& r : recvs_) {
    if (r->request.peer != q) continue;
    needed = true;
    // It left without sending what this rank waits for, but with another tag.
    Status mismatch = unmatched_tag(*r);
    if (!mismatch.ok()) return fail(mismatch);
  }
  if (needed) fail(why);
}

bool TcpTransport::has_queued_sends() const {
  for (const auto& p : peers_) {
    if (p.link == Link::kReady && !p.sends.empty()) return true;
  }
  return false;
}

Status TcpTransport::write_queued() {
  for (int q = 0; q < size_; ++q) {
    if (peers_[q].link != Link::kReady || peers_[q].sends.empty() || !peers_[q].closed.ok()) continue;
    Status st = write_to(q);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

Status TcpTransport::write_to(int q) {
  Peer& p = peers_[q];
  bool wrote = false;
  while (!p.sends.empty()) {
    OutgoingSend& s = p.sends.front();
    iovec iov[2];
    size_t n_iov = 0;
    const size_t header_bytes = sizeof(Header);
    if (s.sent < header_bytes) {
      iov[n_iov++] = {reinterpret_cast<uint8_t*>(&s.header) + s.sent, header_bytes - s.sent};
      if (s.bytes) iov[n_iov++] = {const_cast<uint8_t*>(s.data), s.bytes};
    } else {
      size_t off = s.sent - header_bytes;
      iov[n_iov++] = {const_cast<uint8_t*>(s.data) + off, s.bytes - off};
    }
    ssize_t n;
    if (p.uses_shm()) {
      n = static_cast<ssize_t>(p.out_ring.write(iov, n_iov));
      if (n == 0) break;  // the ring is full: the peer has yet to read
      wrote = true;
    } else {
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = n_iov;
      n = ::sendmsg(p.socket.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok_status();
      const int err = errno;
      // The peer may have failed for a reason of its own (another rank
      // died) and said so just before it dropped its connections: read
      // what it sent first, so that its report, not this broken pipe,
      // names the cause (and the peer is not taken for dead).
      if (!p.uses_shm() && failed_.ok() && !reading_after_send_error_) {
        reading_after_send_error_ = true;
        Status ignored = read_from(q);
        (void)ignored;
        reading_after_send_error_ = false;
        if (!failed_.ok()) return failed_;
      }
      return lost(q, network_error(peer_name(q) + " is gone: sending failed with " + std::strerror(err) +
                                   " (the peer process probably died)"));
    }
    s.sent += static_cast<size_t>(n);
    if (s.sent == header_bytes + s.bytes) {
      Completion done = std::move(s.done);
      p.sends.pop_front();
      --pending_;
      done(Status::ok_status(), -1);
    }
  }
  if (wrote) {
    ++shm_moves_;
    ring_doorbell(q);
  }
  return Status::ok_status();
}

Deadline TcpTransport::earliest_deadline() const {
  Deadline d = Deadline::never();
  for (const auto& r : recvs_) d = Deadline::sooner(d, r->deadline);
  for (const auto& p : peers_) {
    if (p.body_recv) d = Deadline::sooner(d, p.body_recv->deadline);
    for (const auto& s : p.sends) d = Deadline::sooner(d, s.deadline);
  }
  return d;
}

std::string TcpTransport::owed_peers() const {
  std::vector<int> from, to;
  for (const auto& r : recvs_) from.push_back(r->request.peer);
  for (int q = 0; q < size_; ++q) {
    if (!peers_[q].sends.empty()) to.push_back(q);
    if (peers_[q].body_recv) from.push_back(q);
  }
  auto list = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      s += (i ? ", " : "") + (v[i] == kAnySource ? std::string("any") : std::to_string(v[i]));
    }
    return s + "]";
  };
  std::string out;
  if (!from.empty()) out += "still waiting to receive from ranks " + list(from);
  if (!to.empty()) out += std::string(out.empty() ? "" : "; ") + "still sending to ranks " + list(to);
  return out;
}

// expire fails the transport when a request passed its deadline: its
// stream position is then unknown, so the group cannot go on.
void TcpTransport::expire(Clock::time_point now) {
  const std::string* what = nullptr;
  for (const auto& r : recvs_) {
    if (r->deadline.is_never() || r->deadline.when() > now) continue;
    what = r->what;
    // A peer's message with another tag explains the wait better than "timed out".
    Status mismatch = unmatched_tag(*r);
    if (!mismatch.ok()) return fail(mismatch);
  }
  for (const auto& p : peers_) {
    if (p.body_recv && !p.body_recv->deadline.is_never() && p.body_recv->deadline.when() <= now)
      what = p.body_recv->what;
    for (const auto& s : p.sends) {
      if (!s.deadline.is_never() && s.deadline.when() <= now) what = s.what;
    }
  }
  if (what) fail(timeout_error(*what + " timed out: " + owed_peers()));
}

template <class Finished>
bool TcpTransport::drive(Finished finished, Deadline until, bool stop_on_wake) {
  SpinPermit permit;
  // Spin while data keeps moving: every event pushes the end of the spin
  // out again, so a large transfer never pays a wake-up per socket buffer;
  // only a quiet spell of spin_us_ puts the thread to sleep.
  const auto spin = std::chrono::microseconds(permit.granted() ? spin_us_ : 0);
  // One clock read per turn of the loop, taken at its end and used at the
  // start of the next: a small message's whole trip is a few such turns,
  // and each read costs ~25 ns here.
  Clock::time_point now = Clock::now();
  auto spin_until = now + spin;
  // What each pollfd stands for: a peer's connection (>= 0), a peer's
  // connection awaiting its answer (-2 - peer), a handshake (-1000000 -
  // index), the listener (kListenerSlot).
  constexpr int kListenerSlot = -1;
  constexpr int kHandshakeBase = -1000000;
  std::vector<pollfd> fds;
  std::vector<int> slot;
  uint32_t iteration = 0, turn = 0;
  for (;;) {
    if (finished()) return true;
    if (!failed_.ok()) return true;
    if (arena_) {
      // Same-host peers: move bytes through the rings without any system
      // call; their sockets only matter for doorbells and departures.
      const uint64_t before = shm_moves_;
      for (int q = 0; q < size_ && failed_.ok(); ++q) {
        Peer& p = peers_[q];
        if (!p.uses_shm() || !p.closed.ok()) continue;
        Status st = p.sends.empty() ? Status::ok_status() : write_to(q);
        if (st.ok()) st = read_from(q);
        if (!st.ok()) fail(st);
      }
      if (shm_moves_ != before) spin_until = now + spin;
      if (finished() || !failed_.ok()) return true;
    }
    fds.clear();
    slot.clear();
    for (int q = 0; q < size_; ++q) {
      if (!peers_[q].socket.valid() || !peers_[q].closed.ok()) continue;
      if (peers_[q].link == Link::kInitiated) {
        slot.push_back(-2 - q);
        fds.push_back(pollfd{peers_[q].socket.fd(), POLLIN, 0});
        continue;
      }
      if (peers_[q].link != Link::kReady) continue;
      short events = POLLIN;
      if (!peers_[q].sends.empty() && !peers_[q].uses_shm()) events |= POLLOUT;
      slot.push_back(q);
      fds.push_back(pollfd{peers_[q].socket.fd(), events, 0});
    }
    for (size_t h = 0; h < handshakes_.size(); ++h) {
      slot.push_back(kHandshakeBase - static_cast<int>(h));
      fds.push_back(pollfd{handshakes_[h].socket.fd(), POLLIN, 0});
    }
    if (listener_.valid()) {
      slot.push_back(kListenerSlot);
      fds.push_back(pollfd{listener_.fd(), POLLIN, 0});
    }
    size_t n = fds.size();
    fds.push_back(pollfd{wake_fd_, POLLIN, 0});
    ++n;
    int timeout = now < spin_until ? 0 : Deadline::sooner(until, earliest_deadline()).poll_timeout_ms();
    if (timeout != 0 && arena_) {
      // About to sleep: say so, then look once more, so that a peer that
      // wrote just before it saw the flag is not missed (both sides order
      // their flag and ring accesses with full fences).
      arena_->sleeping(arena_->local_index()).store(1, std::memory_order_seq_cst);
      if (shm_ready()) timeout = 0;
    }
    int rc = 0;
    // Spinning on rings alone: the sockets need a look only now and then.
    if (timeout != 0 || !all_shm_ || (++iteration & 15) == 0) rc = ::poll(fds.data(), n, timeout);
    // After a sleep the turn's clock reading is stale by the sleep: what
    // woke it must push the end of the spin out from now, not from then.
    if (timeout != 0) now = Clock::now();
    if (arena_) arena_->sleeping(arena_->local_index()).store(0, std::memory_order_relaxed);
    if (rc < 0 && errno != EINTR) {
      fail(network_error(std::string("poll failed: ") + std::strerror(errno)));
      continue;
    }
    // Nothing yet while spinning: let other runnable threads (other ranks on
    // an oversubscribed host) have the core before polling again. Ranks
    // that all have a core of their own (the arena knows) spin bare for
    // the first quarter of a quiet spell, as Arena::wait_for does: a yield
    // is a system call, ~0.2 us, more than a small message's trip, and the
    // core count does not see other jobs on the host.
    if (rc == 0 && timeout == 0 && (!arena_ || arena_->oversubscribed() || now + spin * 3 / 4 >= spin_until))
      sched_yield();
    if (rc > 0 && fds[n - 1].revents) {
      uint64_t count;
      ssize_t ignored = ::read(wake_fd_, &count, sizeof count);
      (void)ignored;
      if (interrupted_.load()) {
        Status reason;
        {
          std::lock_guard<std::mutex> lock(interrupt_mu_);
          reason = interrupt_reason_;
        }
        fail(reason);
        continue;
      }
      if (stop_on_wake) {
        // Woken for new work, maybe before this call's first look at the
        // deadlines: look now, so that a stream of wake-ups cannot keep a
        // request past its deadline.
        now = Clock::now();
        if (earliest_deadline().when() <= now) expire(now);
        return false;
      }
    }
    if (rc > 0) {
      if (rc > (fds[n - 1].revents ? 1 : 0)) spin_until = now + spin;
      bool accept_now = false;
      std::vector<size_t> handshakes_ready;
      for (size_t i = 0; i + 1 < n && failed_.ok(); ++i) {
        const short re = fds[i].revents;
        if (!re) continue;
        const int what_slot = slot[i];
        if (what_slot == kListenerSlot) {
          accept_now = true;
        } else if (what_slot <= kHandshakeBase) {
          handshakes_ready.push_back(static_cast<size_t>(kHandshakeBase - what_slot));
        } else if (what_slot <= -2) {
          Status st = read_ack(-2 - what_slot);
          if (!st.ok()) fail(st);
        } else {
          const int q = what_slot;
          if (!peers_[q].closed.ok()) continue;
          Status st;
          if (peers_[q].uses_shm()) {
            st = drain_socket(q);
          } else {
            if (re & POLLOUT) st = write_to(q);
            if (st.ok() && (re & (POLLIN | POLLERR | POLLHUP))) st = read_from(q);
          }
          if (!st.ok()) fail(st);
        }
      }
      // Handshakes go last to first, so that removing one keeps the others'
      // indices; then new connections.
      for (auto it = handshakes_ready.rbegin(); it != handshakes_ready.rend() && failed_.ok(); ++it) {
        Status st = read_handshake(*it);
        if (!st.ok()) fail(st);
      }
      if (accept_now && failed_.ok()) accept_links();
    }
    now = Clock::now();
    // Deadlines are looked at in the first turn of every call (a one-turn
    // progress() from a waiting collective included), after every sleep,
    // and every 64th turn of a spin: each look walks every pending request.
    if ((timeout != 0 || (turn++ & 63) == 0) && earliest_deadline().when() <= now) expire(now);
    if (finished()) return true;
    if (!until.is_never() && until.when() <= now) return false;
  }
}

Status TcpTransport::exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs,
                              Deadline deadline, const std::string& what) {
  check_interrupt();
  if (!failed_.ok()) return failed_;
  size_t remaining = num_sends + num_recvs;
  Status first_error;
  // post_one posts a receive whose completion may re-post it (on_arrival).
  std::function<void(RecvRequest*)> post_one = [&](RecvRequest* out) {
    post_recv(*out, deadline, &what,
              [&remaining, &first_error, &post_one, out](const Status& st, int source) {
                out->source = source;
                if (st.ok() && out->on_arrival && out->on_arrival(out->context, *out)) {
                  post_one(out);
                  return;
                }
                --remaining;
                if (!st.ok() && first_error.ok()) first_error = st;
              });
  };
  for (size_t i = 0; i < num_recvs; ++i) post_one(&recvs[i]);
  for (size_t i = 0; i < num_sends; ++i) {
    post_send(sends[i], deadline, &what, [&remaining, &first_error](const Status& st, int) {
      --remaining;
      if (!st.ok() && first_error.ok()) first_error = st;
    });
  }
  drive([&] { return remaining == 0; }, Deadline::never(), false);
  return first_error;
}

void TcpTransport::progress(Deadline until) {
  check_interrupt();
  drive([&] { return pending_ == 0 && !listener_.valid(); }, until, true);
}

}  // namespace cohort::tcp

namespace cohort::tcp {

void TcpTransport::attach_shm(std::unique_ptr<shm::Arena> arena) {
  arena_ = std::move(arena);
  const int me = arena_->local_index();
  all_shm_ = arena_->local_size() == size_;
  for (int i = 0; i < arena_->local_size(); ++i) {
    const int q = arena_->local_ranks()[static_cast<size_t>(i)];
    if (q == rank_) continue;
    peers_[q].local = i;
    peers_[q].out_ring = arena_->ring(me, i);
    peers_[q].in_ring = arena_->ring(i, me);
  }
}

void TcpTransport::ring_doorbell(int q) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!arena_->sleeping(peers_[q].local).load(std::memory_order_relaxed)) return;
  const uint8_t bell = 0;
  ssize_t ignored = ::send(peers_[q].socket.fd(), &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)ignored;
}

bool TcpTransport::shm_ready() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (const Peer& p : peers_) {
    if (!p.uses_shm() || !p.closed.ok()) continue;
    if (p.in_ring.readable() > 0) return true;
    if (!p.sends.empty() && p.out_ring.room() > 0) return true;
  }
  return false;
}

Status TcpTransport::drain_socket(int q) {
  Peer& p = peers_[q];
  uint8_t bells[256];
  for (;;) {
    ssize_t n = ::recv(p.socket.fd(), bells, sizeof bells, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok_status();
      // A reset is an end like any other here: this socket carries only
      // doorbell bytes, and a peer that finished its work and closed with
      // one of ours unread resets the connection instead of closing it.
      // Its ring still holds what it wrote.
      if (errno != ECONNRESET) {
        return lost(q, network_error(peer_name(q) + " is gone: its socket failed with " +
                                     std::strerror(errno) + " (the peer process probably died)"));
      }
    }
    // The socket closed: the peer is gone or failed. What it wrote to the
    // ring before that (maybe the reason it failed) still counts.
    Status st = read_from(q);
    if (!st.ok() || !failed_.ok()) return st;
    if (p.in_body || p.header_got > 0) {
      return lost(q, network_error(peer_name(q) +
                                   " closed its connection in the middle of a message (the peer process "
                                   "exited or was killed)"));
    }
    peer_closed(q, lost(q, network_error(peer_name(q) +
                                         " closed its connection (the peer process exited or was killed)")));
    return Status::ok_status();
  }
}

Status TcpTransport::poll_health() {
  check_interrupt();
  if (!failed_.ok()) return failed_;
  std::vector<pollfd> fds;
  std::vector<int> who;
  for (int q = 0; q < size_; ++q) {
    const Peer& p = peers_[q];
    if (!p.socket.valid() || !p.closed.ok() || p.link != Link::kReady) continue;
    fds.push_back(pollfd{p.socket.fd(), POLLIN, 0});
    who.push_back(q);
  }
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
    for (size_t i = 0; i < fds.size() && failed_.ok(); ++i) {
      if (!fds[i].revents) continue;
      const int q = who[i];
      Status st = peers_[q].uses_shm() ? drain_socket(q) : read_from(q);
      if (!st.ok()) fail(st);
    }
  }
  for (int q = 0; q < size_ && failed_.ok(); ++q) {
    if (!peers_[q].uses_shm() || !peers_[q].closed.ok()) continue;
    Status st = read_from(q);
    if (!st.ok()) fail(st);
  }
  // A peer that merely closed is not reported: it may have left after
  // doing its part of what the caller waits for. One that failed said so
  // first (failed_ is then set), and one that died is the caller's to see.
  return failed_;
}

}  // namespace cohort::tcp
