// link.h (shm): a peer's link through this host's shared memory.
//
// Two rings of the host's arena (arena.h) carry the very same frames a
// socket would, one each way, with no system call. The peer's TCP socket
// stays open for two things only: a doorbell byte that wakes a rank
// asleep in poll(2), and the end-of-file that tells that the peer process
// is gone.
#pragma once

#include <memory>
#include <string>

#include "common/socket.h"
#include "transport/link.h"
#include "transport/shm/arena.h"

namespace cohort::shm {

class ShmLink : public Link {
 public:
  // The link to the arena's local rank `peer_local`, with `doorbell`, the
  // socket connected to it; `address` and `peer_name` for messages.
  ShmLink(std::shared_ptr<Arena> arena, int peer_local, Socket doorbell, std::string address,
          std::string peer_name);

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
  Socket doorbell_;
  std::string address_;
  std::string peer_name_;
  // ended_: the doorbell socket closed, so the peer is gone; what it put
  // in the ring before still counts.
  bool ended_ = false;
};

}  // namespace cohort::shm
