#include "transport/tcp/acceptor.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/logging.h"

namespace cohort::tcp {

TcpAcceptor::TcpAcceptor(int rank, Socket listener, std::vector<TcpLink*> links,
                         std::shared_ptr<const GroupCredentials> credentials)
    : rank_(rank),
      listener_(std::move(listener)),
      links_(std::move(links)),
      credentials_(std::move(credentials)) {}

void TcpAcceptor::watch(std::vector<pollfd>& fds) {
  for (const Handshake& h : handshakes_) fds.push_back(pollfd{h.socket.fd(), POLLIN, 0});
  fds.push_back(pollfd{listener_.fd(), POLLIN, 0});
}

Status TcpAcceptor::on_ready(const pollfd* fds, size_t n, std::vector<int>* became_ready) {
  // fds: the handshakes in order, then the listener (watch's order).
  ready_handshakes_.clear();
  for (size_t i = 0; i + 1 < n; ++i) {
    if (fds[i].revents) ready_handshakes_.push_back(i);
  }
  // Last to first, so that removing one keeps the others' indices; then
  // new connections.
  for (auto it = ready_handshakes_.rbegin(); it != ready_handshakes_.rend(); ++it) {
    Status st = read_handshake(*it, became_ready);
    if (!st.ok()) return st;
  }
  if (n > 0 && fds[n - 1].revents) return accept_all();
  return Status::ok_status();
}

Status TcpAcceptor::accept_all() {
  for (;;) {
    int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        return Status::ok_status();
      // Out of descriptors (or worse): the listener would stay readable and
      // the loop spin, so the group gives up with the reason.
      return network_error("rank " + std::to_string(rank_) +
                           " cannot accept a peer's connection: " + std::strerror(errno));
    }
    handshakes_.push_back(Handshake{Socket(fd), {}});
  }
}

Status TcpAcceptor::read_handshake(size_t index, std::vector<int>* became_ready) {
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
  const int size = static_cast<int>(links_.size());
  // A peer without a link here is reached another way (shared memory):
  // it has no business calling.
  const bool known = q >= 0 && q < size && q != rank_ && links_[q] != nullptr;
  const bool connected = known && links_[q]->ready();
  auto refusal = judge_hello(hello, *credentials_, rank_, size, connected);
  if (!refusal && !known) refusal = Refusal::kRankOutOfRange;
  if (refusal) {
    COHORT_LOG(kWarning) << refused_by_us(*refusal, hello, rank_, size) << " (from "
                         << peer_address(socket.fd()) << ")";
    const std::vector<uint8_t> no = encode_refusal(*refusal, credentials_->identity);
    (void)send_all(socket.fd(), no.data(), no.size(), Deadline::after(std::chrono::seconds(1)));
    return Status::ok_status();
  }
  TcpLink& link = *links_[q];
  const bool ours_wins = link.state() == TcpLink::State::kInitiated && rank_ < q;
  const uint8_t answer = static_cast<uint8_t>(ours_wins ? HelloVerdict::kUseYours : HelloVerdict::kWelcome);
  Status st = send_all(socket.fd(), &answer, 1, Deadline::after(std::chrono::seconds(10)));
  if (!st.ok() || ours_wins) return Status::ok_status();  // it will use ours
  link.adopt(std::move(socket));
  became_ready->push_back(q);
  return Status::ok_status();
}

}  // namespace cohort::tcp
