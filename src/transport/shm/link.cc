#include "transport/shm/link.h"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace cohort::shm {

ShmLink::ShmLink(std::shared_ptr<Arena> arena, int peer_local, Socket doorbell, std::string address,
                 std::string peer_name)
    : arena_(std::move(arena)),
      peer_local_(peer_local),
      out_(arena_->ring(arena_->local_index(), peer_local)),
      in_(arena_->ring(peer_local, arena_->local_index())),
      doorbell_(std::move(doorbell)),
      address_(std::move(address)),
      peer_name_(std::move(peer_name)) {}

LinkIo ShmLink::write(const iovec* iov, size_t n) {
  const size_t took = out_.write(iov, n);
  return took ? LinkIo::moved(took) : LinkIo::blocked();
}

LinkIo ShmLink::read(void* out, size_t n) {
  const size_t got = in_.read(out, n);
  if (got) return LinkIo::moved(got);
  return ended_ ? LinkIo::ended() : LinkIo::blocked();
}

Status ShmLink::write_whole(const void* data, size_t n, Deadline deadline) {
  (void)deadline;  // a ring cannot be waited on here: its reader may be the one who failed
  if (out_.room() < n) return network_error("no room in the ring to " + peer_name_);
  iovec iov{const_cast<void*>(data), n};
  out_.write(&iov, 1);
  return Status::ok_status();
}

LinkPoll ShmLink::poll(bool has_sends) const {
  (void)has_sends;  // bytes go through the ring: the socket only rings
  if (ended_ || !doorbell_.valid()) return {};
  return {doorbell_.fd(), POLLIN};
}

Status ShmLink::on_ready(short revents, bool* became_ready) {
  (void)revents;
  *became_ready = false;
  uint8_t bells[256];
  for (;;) {
    ssize_t n = ::recv(doorbell_.fd(), bells, sizeof bells, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok_status();
      // A reset is an end like any other here: this socket carries only
      // doorbell bytes, and a peer that finished its work and closed with
      // one of ours unread resets the connection instead of closing it.
      if (errno != ECONNRESET) {
        return network_error(peer_name_ + " is gone: its socket failed with " + std::strerror(errno) +
                             " (the peer process probably died)");
      }
    }
    // The socket closed: the peer is gone or failed. What it wrote to the
    // ring before that (maybe the reason it failed) is read first.
    ended_ = true;
    return Status::ok_status();
  }
}

bool ShmLink::about_to_sleep(bool has_sends) {
  arena_->sleeping(arena_->local_index()).store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return in_.readable() > 0 || (has_sends && out_.room() > 0);
}

void ShmLink::awake() {
  arena_->sleeping(arena_->local_index()).store(0, std::memory_order_relaxed);
}

void ShmLink::moved() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!arena_->sleeping(peer_local_).load(std::memory_order_relaxed)) return;
  const uint8_t bell = 0;
  ssize_t ignored = ::send(doorbell_.fd(), &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)ignored;
}

void ShmLink::shut_down() {
  if (doorbell_.valid()) ::shutdown(doorbell_.fd(), SHUT_RDWR);
}

}  // namespace cohort::shm
