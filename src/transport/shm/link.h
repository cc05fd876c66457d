// link.h (shm): a peer's link through this host's shared memory.
//
// Two rings of the host's arena (arena.h) carry the very same frames a
// socket would, one each way, with no system call, and no connection
// between the two ranks: a byte to the peer's doorbell wakes it when it
// sleeps in poll(2), the ring's closed flag is a clean end, and the
// peer's pidfd tells that its process is gone (peer_signals.h). The
// doorbell of this rank is one descriptor for all its host peers: the
// engine polls it once (EngineOptions::doorbell_fd).
#pragma once

#include <memory>
#include <string>

#include "transport/link.h"
#include "transport/shm/arena.h"

namespace cohort::shm {

class ShmLink : public Link {
 public:
  // The link to the arena's local rank `peer_local`; `address` and
  // `peer_name` for messages.
  ShmLink(std::shared_ptr<Arena> arena, int peer_local, std::string address, std::string peer_name);
  // Closes the ring to the peer, as shut_down does: its end-of-file.
  ~ShmLink() override;

  const std::string& address() const override { return address_; }
  bool ready() const override { return true; }
  LinkIo write(const iovec* iov, size_t n) override;
  LinkIo read(void* out, size_t n) override;
  Status write_whole(const void* data, size_t n, Deadline deadline) override;
  bool moves_in_user_space() const override { return true; }
  LinkPoll poll(bool has_sends) const override;
  Status on_ready(short revents, bool* became_ready) override;
  bool about_to_sleep(bool has_sends) override;
  void awake() override;
  void moved() override;
  void shut_down() override;

 private:
  std::shared_ptr<Arena> arena_;
  int peer_local_;
  Ring out_;
  Ring in_;
  std::string address_;
  std::string peer_name_;
  // ended_: the peer's process is gone (its pidfd said so); what it put in
  // the ring before still counts.
  bool ended_ = false;
};

}  // namespace cohort::shm
