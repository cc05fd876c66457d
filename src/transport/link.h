// link.h: one peer's byte pipe, under the engine (engine.h).
//
// Gloo calls it a pair. The engine frames messages, matches them to
// receives and keeps the unexpected ones; a Link only moves bytes to and
// from one peer, never blocking: write what fits, read what is there, and
// say when the peer is gone. tcp/link.h carries the bytes over a socket
// (and makes the connection on first use when the group is lazy);
// shm/link.h through a pair of rings in this host's shared memory, with
// no connection at all (a doorbell and a pidfd: shm/peer_signals.h).
#pragma once

#include <poll.h>
#include <sys/uio.h>

#include <cstddef>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace cohort {

// LinkIo is what one read or write did.
struct LinkIo {
  enum class Outcome {
    kMoved,    // `bytes` bytes (more than zero) went through
    kBlocked,  // nothing now: the pipe is full (write) or empty (read)
    kEnded,    // read only: the peer closed its end; nothing more will come
    kFailed,   // the pipe broke; `error` is the errno
  };
  Outcome outcome = Outcome::kBlocked;
  size_t bytes = 0;
  int error = 0;
  // drained (a read that moved bytes): the pipe held nothing more when it
  // was read, so a read now would most likely say blocked. A caller that
  // waits in poll(2) anyway may stop here and save that call (one system
  // call per message over TCP); a read still says blocked only when
  // nothing is there.
  bool drained = false;

  static LinkIo moved(size_t n, bool drained = false) { return {Outcome::kMoved, n, 0, drained}; }
  static LinkIo blocked() { return {Outcome::kBlocked, 0, 0}; }
  static LinkIo ended() { return {Outcome::kEnded, 0, 0}; }
  static LinkIo failed(int error) { return {Outcome::kFailed, 0, error}; }
};

// LinkPoll is what a link asks of the engine's poll(2) call, and what the
// engine does once the descriptor is ready.
struct LinkPoll {
  int fd = -1;       // -1: nothing to watch now
  short events = 0;  // POLLIN, POLLOUT
};

class Link {
 public:
  virtual ~Link() = default;

  // address describes the peer's end for messages ("10.0.0.3:4711").
  virtual const std::string& address() const = 0;

  // ready is true once the link carries messages. A lazy TCP link is not
  // ready until it has connected and both sides agreed (tcp/link.h).
  virtual bool ready() const = 0;
  // open starts making the connection (a lazy link, on the first send to
  // its peer); a no-op for a link that is ready or already on its way.
  virtual Status open(Deadline deadline) {
    (void)deadline;
    return Status::ok_status();
  }

  // write takes as much of iov[0..n) as fits now.
  virtual LinkIo write(const iovec* iov, size_t n) = 0;
  // read copies up to `n` bytes that are there now into `out`.
  virtual LinkIo read(void* out, size_t n) = 0;
  // write_whole writes all `n` bytes by `deadline` or fails; used only on
  // the way out (a failure report, the rest of a half-sent message). A
  // link that cannot wait writes them only when they fit at once.
  virtual Status write_whole(const void* data, size_t n, Deadline deadline) = 0;

  // moves_in_user_space is true when bytes move without a system call
  // (shared memory): the engine then moves them on every turn of its loop
  // and polls the descriptor only for wake-ups and the peer's end.
  virtual bool moves_in_user_space() const { return false; }

  // poll says what to watch: `has_sends` when the engine has bytes queued
  // for this peer.
  virtual LinkPoll poll(bool has_sends) const = 0;
  // on_ready handles what poll(2) reported that is not message data: the
  // answer to a lazy link's hello, a shared-memory peer's exit (its
  // pidfd). Sets *became_ready when the link just
  // became ready (the engine then writes what it queued). An error ends
  // the group.
  virtual Status on_ready(short revents, bool* became_ready) {
    (void)revents;
    *became_ready = false;
    return Status::ok_status();
  }

  // about_to_sleep is called before the engine sleeps in poll(2): a link
  // that moves in user space asks its peer for a doorbell from now on and
  // answers true when bytes are already waiting (or, with `has_sends`,
  // room for them), so that the engine does not sleep past them.
  virtual bool about_to_sleep(bool has_sends) {
    (void)has_sends;
    return false;
  }
  // awake undoes about_to_sleep.
  virtual void awake() {}
  // moved is called after a pass that moved bytes through the link, so
  // that a peer asleep in poll(2) is woken (shared memory's doorbell).
  virtual void moved() {}

  // shut_down ends the link for both directions: the peer sees its end.
  virtual void shut_down() = 0;

  // unreachable_since says, for a timeout's message, why the peer's host
  // looks cut off at the network level ("nothing acknowledged for 4.1 s"),
  // or "" when its host still answers or the link cannot tell. A peer
  // process that is merely stopped or slow still has its kernel answer,
  // so this tells a cut link or a dead host from a stuck rank.
  virtual std::string unreachable_since() const { return {}; }

  // pace caps how fast the kernel sends this link's bytes (0: no cap).
  // Only a TCP link can; a link not connected yet stays unpaced. Once
  // capped, a socket keeps the kernel's own TCP pacing (at about its
  // congestion window's rate) after the cap is lifted.
  virtual void pace(uint64_t bytes_per_second) { (void)bytes_per_second; }
};

// Acceptor takes the connections that peers make to this rank when links
// are made on first use (tcp/acceptor.h): it reads each caller's hello and
// hands the connection to that peer's link.
class Acceptor {
 public:
  virtual ~Acceptor() = default;
  // watch appends the descriptors it wants polled for reading.
  virtual void watch(std::vector<pollfd>& fds) = 0;
  // on_ready takes poll(2)'s answer for the `n` descriptors that watch
  // appended last, and appends to *became_ready the peers whose link just
  // became ready. An error ends the group.
  virtual Status on_ready(const pollfd* fds, size_t n, std::vector<int>* became_ready) = 0;
};

}  // namespace cohort
