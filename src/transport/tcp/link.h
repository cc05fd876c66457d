// link.h (tcp): a peer's link over one TCP connection.
//
// An eager group hands every link its connection, made and agreed on by
// connect_mesh (connect.h). A lazy group's links start idle: the first
// send to the peer connects, says hello (hello.h) and waits for the
// peer's one-byte verdict (kInitiated); if both sides call at once, the
// connection the lower rank made wins and the other side waits for it
// (kAwaitPeer), which the acceptor (acceptor.h) hands over with adopt().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/socket.h"
#include "transport/link.h"
#include "transport/tcp/hello.h"

namespace cohort::tcp {

class TcpLink : public Link {
 public:
  enum class State { kReady, kIdle, kInitiated, kAwaitPeer };

  // An eager link over `socket`, connected and agreed on.
  TcpLink(Socket socket, std::string address);
  // A lazy link from `rank` to `peer` of a group of `size`, which connects
  // to `address` on first use showing `credentials`.
  TcpLink(std::string address, int rank, int peer, int size,
          std::shared_ptr<const GroupCredentials> credentials);

  const std::string& address() const override { return address_; }
  bool ready() const override { return state_ == State::kReady; }
  Status open(Deadline deadline) override;
  LinkIo write(const iovec* iov, size_t n) override;
  LinkIo read(void* out, size_t n) override;
  Status write_whole(const void* data, size_t n, Deadline deadline) override;
  LinkPoll poll(bool has_sends) const override;
  Status on_ready(short revents, bool* became_ready) override;
  void shut_down() override;
  std::string unreachable_since() const override;
  void pace(uint64_t bytes_per_second) override;

  State state() const { return state_; }
  // adopt takes the connection the peer made to this rank (lazy).
  void adopt(Socket socket);

 private:
  // read_verdict reads the peer's answer to this link's hello.
  Status read_verdict(bool* became_ready);
  // probe_when_idle turns on keepalive probes (unreachable_since reads
  // their answers) that never close the connection before the kernel's
  // hour: a link back within the operation's timeout loses nothing.
  void probe_when_idle();
  std::string peer_name() const;

  // Read-ahead: a read takes what the caller asked for and, in the same
  // system call, up to kReadAheadBytes more into ahead_, from which the
  // next reads are served. A small message's header and payload (and the
  // next messages, when they queue up) then cost one recvmsg(2) instead
  // of one each, as Open MPI's TCP transport does with its endpoint
  // cache. The engine and the wire read a link until it says blocked, so
  // nothing is left here while they wait in poll(2).
  static constexpr size_t kReadAheadBytes = 8192;
  std::unique_ptr<uint8_t[]> ahead_;  // made at the first read
  size_t ahead_at_ = 0;               // next byte of ahead_ to hand out
  size_t ahead_end_ = 0;              // ahead_ holds bytes [ahead_at_, ahead_end_)
  // ahead_emptied_socket_: the recvmsg(2) that filled ahead_ took less than
  // it had room for, so the socket was empty after it: the read that hands
  // out ahead_'s last byte says drained (LinkIo).
  bool ahead_emptied_socket_ = false;

  Socket socket_;
  std::string address_;
  State state_ = State::kReady;
  int rank_ = -1;
  int peer_ = -1;
  int size_ = 0;
  std::shared_ptr<const GroupCredentials> credentials_;
};

}  // namespace cohort::tcp
