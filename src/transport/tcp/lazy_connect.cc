// Lazy connections: a TcpTransport made with a listener instead of sockets
// connects to a peer the first time it sends to it.
//
// The initiator connects, sends a hello (hello.h) and waits for the
// verdict: kWelcome, use this connection; kUseYours, the peer had started
// one to us too and, being the lower rank, keeps its own, so wait for that
// one; kRefused, the caller is no peer of the acceptor's group, which the
// caller reports naming the acceptor. The acceptor welcomes a peer unless it
// started a connection to that peer itself and has the lower rank. Either
// way each pair ends with exactly one connection, and no message is sent on
// a connection before both sides agreed on it.
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

bool split_address(const std::string& a, std::string* host, uint16_t* port) {
  auto colon = a.rfind(':');
  if (colon == std::string::npos) return false;
  *host = a.substr(0, colon);
  if (!host->empty() && host->front() == '[') *host = host->substr(1, host->size() - 2);
  *port = static_cast<uint16_t>(std::atoi(a.c_str() + colon + 1));
  return true;
}

}  // namespace

TcpTransport::TcpTransport(int rank, int size, Socket listener, std::vector<std::string> addresses,
                           GroupCredentials credentials)
    : TcpTransport(rank, size, std::vector<Socket>(static_cast<size_t>(size)), std::move(addresses)) {
  listener_ = std::move(listener);
  credentials_ = std::move(credentials);
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
  const std::vector<uint8_t> hello = encode_hello(make_hello(credentials_, rank_, q, size_));
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
  if (answer == static_cast<uint8_t>(HelloVerdict::kWelcome)) {
    p.link = Link::kReady;
    return write_to(q);  // what was queued for it
  }
  if (answer == static_cast<uint8_t>(HelloVerdict::kRefused)) {
    // The rest of the refusal was sent with its first byte.
    auto why = read_refusal(p.socket.fd(), Deadline::after(std::chrono::seconds(5)));
    if (!why.ok()) return why.status().with_context(peer_name(q) + " refused this rank's hello");
    return invalid_argument(refused_by_them(why.value().first, rank_, q, p.address, why.value().second));
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
    handshakes_.push_back(Handshake{Socket(fd), {}});
  }
}

Status TcpTransport::read_handshake(size_t index) {
  Handshake& h = handshakes_[index];
  auto drop = [&](const char* why) {
    if (why) {
      COHORT_LOG(kWarning) << "rank " << rank_ << ": dropping a connection from "
                           << peer_address(h.socket.fd()) << " " << why;
    }
    handshakes_.erase(handshakes_.begin() + static_cast<std::ptrdiff_t>(index));
    return Status::ok_status();
  };
  // The bytes the hello needs, as far as those received tell; 0: no hello.
  auto needed = [&] { return h.hello.size() < 4 ? 4 : hello_bytes_needed(h.hello.data(), h.hello.size()); };
  const size_t have = h.hello.size();
  const size_t want = needed();
  h.hello.resize(want);
  ssize_t n = ::recv(h.socket.fd(), h.hello.data() + have, want - have, MSG_DONTWAIT);
  h.hello.resize(have + static_cast<size_t>(std::max<ssize_t>(n, 0)));
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::ok_status();
  if (n <= 0) return drop(nullptr);
  if (needed() == 0) return drop("that did not say a cohort hello");
  if (needed() != h.hello.size()) return Status::ok_status();  // more to come
  const Hello hello = decode_hello(h.hello.data(), h.hello.size());
  Socket socket = std::move(h.socket);
  handshakes_.erase(handshakes_.begin() + static_cast<std::ptrdiff_t>(index));
  const int q = hello.rank;
  const bool connected = q >= 0 && q < size_ && q != rank_ && peers_[q].link == Link::kReady;
  if (auto refusal = judge_hello(hello, credentials_, rank_, size_, connected)) {
    COHORT_LOG(kWarning) << refused_by_us(*refusal, hello, rank_, size_) << " (from "
                         << peer_address(socket.fd()) << ")";
    const std::vector<uint8_t> no = encode_refusal(*refusal, credentials_.identity);
    (void)send_all(socket.fd(), no.data(), no.size(), Deadline::after(std::chrono::seconds(1)));
    return Status::ok_status();
  }
  Peer& p = peers_[q];
  const bool ours_wins = p.link == Link::kInitiated && rank_ < q;
  const uint8_t answer = static_cast<uint8_t>(ours_wins ? HelloVerdict::kUseYours : HelloVerdict::kWelcome);
  Status st = send_all(socket.fd(), &answer, 1, Deadline::after(std::chrono::seconds(10)));
  if (!st.ok() || ours_wins) return Status::ok_status();  // it will use ours
  int one = 1;
  setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  p.socket = std::move(socket);  // drops a connection we started, if any: the peer refuses it
  p.link = Link::kReady;
  return write_to(q);
}

}  // namespace cohort::tcp
