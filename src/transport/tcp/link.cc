#include "transport/tcp/link.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/logging.h"

namespace cohort::tcp {
namespace {

// How long the kernel keeps retrying an unanswered connection before it
// closes it. Far longer than any sensible operation timeout, so that the
// operation's own deadline, not the kernel, decides when a cut link has
// been down too long; without it the kernel would close the connection
// after its 9 unanswered keepalive probes, 10 s at one probe a second.
constexpr unsigned kKernelGiveUpMs = 3600 * 1000;

}  // namespace

TcpLink::TcpLink(Socket socket, std::string address)
    : socket_(std::move(socket)), address_(std::move(address)) {
  probe_when_idle();
}

void TcpLink::probe_when_idle() {
  if (!socket_.valid()) return;
  // Best effort: without probes a timeout names the peer but cannot say
  // that its host stopped answering.
  int one = 1, idle_s = 1, interval_s = 1;
  unsigned give_up_ms = kKernelGiveUpMs;
  (void)setsockopt(socket_.fd(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  (void)setsockopt(socket_.fd(), IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  (void)setsockopt(socket_.fd(), IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  (void)setsockopt(socket_.fd(), IPPROTO_TCP, TCP_USER_TIMEOUT, &give_up_ms, sizeof give_up_ms);
}

void TcpLink::pace(uint64_t bytes_per_second) {
  if (!socket_.valid() || state_ != State::kReady) return;
  // The kernel's TCP pacing (SO_MAX_PACING_RATE, bytes a second; ~0 lifts
  // the cap). Linux reads all 64 bits from 4.20 (before, the low 32: a cap
  // above 4 GB/s a stream would wrap). Best effort: unpaced, the stream
  // only runs as it did.
  const uint64_t rate = bytes_per_second ? bytes_per_second : ~uint64_t{0};
  (void)setsockopt(socket_.fd(), SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof rate);
}

std::string TcpLink::unreachable_since() const {
  if (!socket_.valid() || state_ != State::kReady) return {};
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(socket_.fd(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return {};
  // Something is owed an answer (data sent, or a keepalive probe) and the
  // peer's kernel has acknowledged nothing for over a second: a live
  // host answers within a round trip, even when its process is stopped.
  const bool asked = info.tcpi_unacked > 0 || info.tcpi_probes > 0;
  if (!asked || info.tcpi_last_ack_recv < 1000) return {};
  char text[96];
  std::snprintf(text, sizeof text, "its host has acknowledged nothing for %.1f s",
                static_cast<double>(info.tcpi_last_ack_recv) / 1000.0);
  return text;
}

TcpLink::TcpLink(std::string address, int rank, int peer, int size,
                 std::shared_ptr<const GroupCredentials> credentials)
    : address_(std::move(address)),
      state_(State::kIdle),
      rank_(rank),
      peer_(peer),
      size_(size),
      credentials_(std::move(credentials)) {}

std::string TcpLink::peer_name() const {
  return "rank " + std::to_string(peer_) + " (" + address_ + ")";
}

LinkIo TcpLink::write(const iovec* iov, size_t n) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = n;
  for (;;) {
    const ssize_t sent = ::sendmsg(socket_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) return LinkIo::moved(static_cast<size_t>(sent));
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return LinkIo::blocked();
    return LinkIo::failed(sent < 0 ? errno : EPIPE);
  }
}

LinkIo TcpLink::read(void* out, size_t n) {
  if (n == 0) return LinkIo::blocked();  // nothing asked for (no caller does)
  if (ahead_at_ < ahead_end_) {
    const size_t m = std::min(n, ahead_end_ - ahead_at_);
    std::memcpy(out, ahead_.get() + ahead_at_, m);
    ahead_at_ += m;
    return LinkIo::moved(m, ahead_at_ == ahead_end_ && ahead_emptied_socket_);
  }
  if (!ahead_) ahead_ = std::make_unique<uint8_t[]>(kReadAheadBytes);
  iovec iov[2] = {{out, n}, {ahead_.get(), kReadAheadBytes}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  for (;;) {
    const ssize_t got = ::recvmsg(socket_.fd(), &msg, MSG_DONTWAIT);
    if (got > 0) {
      const auto bytes = static_cast<size_t>(got);
      // Less than it had room for: the socket had no more.
      const bool emptied = bytes < n + kReadAheadBytes;
      if (bytes <= n) return LinkIo::moved(bytes, emptied);
      ahead_at_ = 0;
      ahead_end_ = bytes - n;  // the rest went into ahead_
      ahead_emptied_socket_ = emptied;
      return LinkIo::moved(n);
    }
    if (got == 0) return LinkIo::ended();
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return LinkIo::blocked();
    return LinkIo::failed(errno);
  }
}

Status TcpLink::write_whole(const void* data, size_t n, Deadline deadline) {
  return send_all(socket_.fd(), data, n, deadline);
}

LinkPoll TcpLink::poll(bool has_sends) const {
  if (!socket_.valid()) return {};
  if (state_ == State::kInitiated) return {socket_.fd(), POLLIN};
  if (state_ != State::kReady) return {};
  return {socket_.fd(), static_cast<short>(POLLIN | (has_sends ? POLLOUT : 0))};
}

Status TcpLink::on_ready(short revents, bool* became_ready) {
  (void)revents;
  *became_ready = false;
  return state_ == State::kInitiated ? read_verdict(became_ready) : Status::ok_status();
}

void TcpLink::shut_down() {
  if (socket_.valid()) ::shutdown(socket_.fd(), SHUT_RDWR);
}

Status TcpLink::open(Deadline deadline) {
  if (state_ != State::kIdle) return Status::ok_status();
  std::string host;
  uint16_t port = 0;
  if (!split_address(address_, &host, &port)) {
    return network_error("rank " + std::to_string(peer_) + " published a bad address '" + address_ + "'");
  }
  auto s = connect_tcp(host, port, deadline);
  if (!s.ok()) return s.status().with_context("connecting to " + peer_name());
  const std::vector<uint8_t> hello = encode_hello(make_hello(*credentials_, rank_, peer_, size_));
  Status st = send_all(s.value().fd(), hello.data(), hello.size(), deadline);
  if (!st.ok()) return st.with_context("saying hello to " + peer_name());
  socket_ = std::move(s.value());
  state_ = State::kInitiated;
  probe_when_idle();
  COHORT_LOG(kDebug) << "rank " << rank_ << " connecting to " << peer_name() << " on first use";
  return Status::ok_status();
}

Status TcpLink::read_verdict(bool* became_ready) {
  uint8_t answer = 0;
  ssize_t n = ::recv(socket_.fd(), &answer, 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::ok_status();
  if (n <= 0) return network_error(peer_name() + " closed the connection before answering its hello");
  if (answer == static_cast<uint8_t>(HelloVerdict::kWelcome)) {
    state_ = State::kReady;
    *became_ready = true;
    return Status::ok_status();
  }
  if (answer == static_cast<uint8_t>(HelloVerdict::kRefused)) {
    // The rest of the refusal was sent with its first byte.
    auto why = read_refusal(socket_.fd(), Deadline::after(std::chrono::seconds(5)));
    if (!why.ok()) return why.status().with_context(peer_name() + " refused this rank's hello");
    return invalid_argument(refused_by_them(why.value().first, rank_, peer_, address_, why.value().second));
  }
  // The peer, the lower rank, keeps the connection it made to us.
  socket_.reset();
  state_ = State::kAwaitPeer;
  return Status::ok_status();
}

void TcpLink::adopt(Socket socket) {
  int one = 1;
  setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  socket_ = std::move(socket);  // drops a connection we started, if any: the peer refuses it
  ahead_at_ = ahead_end_ = 0;   // nothing read ahead belongs to the new connection
  state_ = State::kReady;
  probe_when_idle();
}

}  // namespace cohort::tcp
