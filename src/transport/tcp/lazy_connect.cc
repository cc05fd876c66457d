// Lazy connections: a TcpTransport made with a listener instead of sockets
// connects to a peer the first time it sends to it.
//
// The initiator connects, sends a hello (magic, rank, world size) and waits
// for one byte: 1, use this connection; 0, the peer had started one to us
// too and, being the lower rank, keeps its own, so wait for that one. The
// acceptor answers 1 unless it started a connection to that peer itself and
// has the lower rank. Either way each pair ends with exactly one connection,
// and no message is sent on a connection before both sides agreed on it.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/byte_codec.h"
#include "common/logging.h"
#include "transport/tcp/transport.h"

namespace cohort::tcp {
namespace {

constexpr uint32_t kHelloMagic = 0x4c454843;  // "CHEL", as connect.cc's eager hello

bool split_address(const std::string& a, std::string* host, uint16_t* port) {
  auto colon = a.rfind(':');
  if (colon == std::string::npos) return false;
  *host = a.substr(0, colon);
  if (!host->empty() && host->front() == '[') *host = host->substr(1, host->size() - 2);
  *port = static_cast<uint16_t>(std::atoi(a.c_str() + colon + 1));
  return true;
}

}  // namespace

TcpTransport::TcpTransport(int rank, int size, Socket listener, std::vector<std::string> addresses)
    : TcpTransport(rank, size, std::vector<Socket>(static_cast<size_t>(size)), std::move(addresses)) {
  listener_ = std::move(listener);
  for (int q = 0; q < size; ++q) peers_[q].link = q == rank ? Link::kReady : Link::kIdle;
}

void TcpTransport::start_link(int q, Deadline deadline) {
  Peer& p = peers_[q];
  std::string host;
  uint16_t port = 0;
  if (!split_address(p.address, &host, &port)) {
    return fail(network_error("rank " + std::to_string(q) + " published a bad address '" + p.address + "'"));
  }
  auto s = connect_tcp(host, port, deadline);
  if (!s.ok()) return fail(s.status().with_context("connecting to " + peer_name(q)));
  std::vector<uint8_t> hello;
  ByteWriter w(&hello);
  w.u32(kHelloMagic);
  w.u32(static_cast<uint32_t>(rank_));
  w.u32(static_cast<uint32_t>(size_));
  Status st = send_all(s.value().fd(), hello.data(), hello.size(), deadline);
  if (!st.ok()) return fail(st.with_context("saying hello to " + peer_name(q)));
  p.socket = std::move(s.value());
  p.link = Link::kInitiated;
  COHORT_LOG(kDebug) << "rank " << rank_ << " connecting to " << peer_name(q) << " on first use";
}

Status TcpTransport::read_ack(int q) {
  Peer& p = peers_[q];
  uint8_t answer = 0;
  ssize_t n = ::recv(p.socket.fd(), &answer, 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::ok_status();
  if (n <= 0) return network_error(peer_name(q) + " closed the connection before answering its hello");
  if (answer == 1) {
    p.link = Link::kReady;
    return write_to(q);  // what was queued for it
  }
  // The peer, the lower rank, keeps the connection it made to us.
  p.socket.reset();
  p.link = Link::kAwaitPeer;
  return Status::ok_status();
}

void TcpTransport::accept_links() {
  for (;;) {
    int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return;
      // Out of descriptors (or worse): the listener would stay readable and
      // the loop spin, so the group gives up with the reason.
      return fail(network_error("rank " + std::to_string(rank_) +
                                " cannot accept a peer's connection: " + std::strerror(errno)));
    }
    handshakes_.push_back(Handshake{Socket(fd), {}, 0});
  }
}

Status TcpTransport::read_handshake(size_t index) {
  Handshake& h = handshakes_[index];
  ssize_t n = ::recv(h.socket.fd(), h.hello + h.got, sizeof h.hello - h.got, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::ok_status();
  if (n <= 0) {
    handshakes_.erase(handshakes_.begin() + static_cast<std::ptrdiff_t>(index));
    return Status::ok_status();
  }
  h.got += static_cast<size_t>(n);
  if (h.got < sizeof h.hello) return Status::ok_status();
  ByteReader r(h.hello, sizeof h.hello);
  uint32_t magic = 0, peer = 0, peer_size = 0;
  r.u32(&magic);
  r.u32(&peer);
  r.u32(&peer_size);
  Socket socket = std::move(h.socket);
  handshakes_.erase(handshakes_.begin() + static_cast<std::ptrdiff_t>(index));
  const int q = static_cast<int>(peer);
  if (magic != kHelloMagic || peer_size != static_cast<uint32_t>(size_) ||
      peer >= static_cast<uint32_t>(size_) || q == rank_ || peers_[q].link == Link::kReady) {
    COHORT_LOG(kWarning) << "rank " << rank_ << ": dropping a connection that is not a peer of this group";
    return Status::ok_status();
  }
  Peer& p = peers_[q];
  const bool ours_wins = p.link == Link::kInitiated && rank_ < q;
  const uint8_t answer = ours_wins ? 0 : 1;
  Status st = send_all(socket.fd(), &answer, 1, Deadline::after(std::chrono::seconds(10)));
  if (!st.ok() || ours_wins) return Status::ok_status();  // it will use ours
  int one = 1;
  setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  p.socket = std::move(socket);  // drops a connection we started, if any: the peer refuses it
  p.link = Link::kReady;
  return write_to(q);
}

}  // namespace cohort::tcp
