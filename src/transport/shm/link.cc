#include "transport/shm/link.h"

#include <atomic>
#include <cerrno>
#include <cstring>

namespace cohort::shm {

ShmLink::ShmLink(std::shared_ptr<Arena> arena, int peer_local, std::string address, std::string peer_name)
    : arena_(std::move(arena)),
      peer_local_(peer_local),
      out_(arena_->ring(arena_->local_index(), peer_local)),
      in_(arena_->ring(peer_local, arena_->local_index())),
      address_(std::move(address)),
      peer_name_(std::move(peer_name)),
      ended_(arena_->signals().gone_before_watched(peer_local)) {}

ShmLink::~ShmLink() {
  shut_down();
}

LinkIo ShmLink::write(const iovec* iov, size_t n) {
  const size_t took = out_.write(iov, n);
  return took ? LinkIo::moved(took) : LinkIo::blocked();
}

LinkIo ShmLink::read(void* out, size_t n) {
  size_t got = in_.read(out, n);
  if (got) return LinkIo::moved(got);
  if (!ended_ && !in_.closed()) return LinkIo::blocked();
  // The end, after whatever came just before it.
  got = in_.read(out, n);
  return got ? LinkIo::moved(got) : LinkIo::ended();
}

Status ShmLink::write_whole(const void* data, size_t n, Deadline deadline) {
  (void)deadline;  // a ring cannot be waited on here: its reader may be the one who failed
  if (out_.room() < n) return network_error("no room in the ring to " + peer_name_);
  iovec iov{const_cast<void*>(data), n};
  out_.write(&iov, 1);
  return Status::ok_status();
}

LinkPoll ShmLink::poll(bool has_sends) const {
  (void)has_sends;  // bytes go through the ring; the doorbell is the engine's to poll
  if (ended_) return {};
  const int death = arena_->signals().death_fd(peer_local_);
  if (death < 0) return {};
  return {death, POLLIN};
}

Status ShmLink::on_ready(short revents, bool* became_ready) {
  *became_ready = false;
  // The pidfd is readable once the peer's process exited: the peer is
  // gone. What it wrote to the ring before that (maybe the reason it
  // failed) is read first.
  if (revents & (POLLIN | POLLHUP | POLLERR)) ended_ = true;
  return Status::ok_status();
}

bool ShmLink::about_to_sleep(bool has_sends) {
  arena_->sleeping(arena_->local_index()).store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // A close whose doorbell another thread of this process drained (RPC's
  // wire has drivers) must not be slept past: the loop's next read ends
  // the link, which is then no longer asked.
  return in_.readable() > 0 || in_.closed() || ended_ || (has_sends && out_.room() > 0);
}

void ShmLink::awake() {
  arena_->sleeping(arena_->local_index()).store(0, std::memory_order_relaxed);
}

void ShmLink::moved() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!arena_->sleeping(peer_local_).load(std::memory_order_relaxed)) return;
  arena_->signals().ring(peer_local_);
}

void ShmLink::shut_down() {
  if (out_.closed()) return;
  out_.close();
  // Rung whether or not the peer said it sleeps: it may be about to.
  arena_->signals().ring(peer_local_);
}

}  // namespace cohort::shm
