// link_loop.h: waiting on every link at once, written once for both of the
// links' drivers: the transport engine (progress_loop.cc: collectives and
// point-to-point) and RPC's message wire (wire.cc).
//
// The protocol that link.h asks of whoever drives links:
// - poll(2)'s table holds the host's shared-memory doorbell first, then
//   each watched link's descriptor (a socket; a shared-memory peer's pidfd
//   for its end), then whatever the driver adds (its wake-up eventfd, the
//   acceptor of a lazy group);
// - links that move in user space are moved on every turn without a
//   system call, so while every link is one of them, a spinning turn looks
//   at the descriptors only every 16th time;
// - before it sleeps, the driver asks every user-space link's peer to ring
//   the doorbell from now on, and does not sleep when one of them already
//   has bytes waiting; once awake it withdraws the request;
// - a rung doorbell is drained, and the next move reads what it rang for.
//
// What a ready link means is the driver's: the engine fails the whole
// group when one breaks, the wire loses that peer alone. So are how long
// it sleeps and who may drive (the engine: the group's worker alone; the
// wire: its own thread or any caller that waits).
#pragma once

#include <poll.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/socket.h"
#include "transport/link.h"

namespace cohort {

// PollTable is one turn's poll(2) table and whose each entry is: owner[i]
// is the peer of fds[i], -1 for the doorbell; entries from `links_end` on
// are the driver's own and have no owner.
struct PollTable {
  std::vector<pollfd> fds;
  std::vector<int> owner;
  size_t links_end = 0;
};

// LinkLoop<Driver> is the protocol above over a driver's links. Driver
// gives it (LinkLoop<Driver> may be its friend):
//   int peer_count() const                 how many peers (this rank too)
//   Link* watched_link(int q) const        q's link while it is to be watched;
//                                          null: none, closed, or lost
//   bool has_sends(int q) const            bytes are queued for q
//   void serve_link(int q, short revents)  q's descriptor is ready
//   bool stops_serving() const             true: serve no more (failed)
// Every step runs on every turn of the drivers' loops, so each is inline
// and the calls into the driver compile to its own code.
template <class Driver>
class LinkLoop {
 public:
  LinkLoop(Driver& driver, int doorbell_fd) : driver_(driver), doorbell_fd_(doorbell_fd) {}

  // count_links notes which links move in user space; called once the
  // driver has its links (they never change kind).
  void count_links() {
    any_user_space_ = false;
    all_user_space_ = false;
    bool any_link = false, every_one = true;
    for (int q = 0; q < driver_.peer_count(); ++q) {
      const Link* link = driver_.watched_link(q);
      if (!link) continue;
      any_link = true;
      if (link->moves_in_user_space()) {
        any_user_space_ = true;
      } else {
        every_one = false;
      }
    }
    all_user_space_ = any_link && every_one;
  }
  bool any_user_space() const { return any_user_space_; }

  // fill starts `t` over with the doorbell and the watched links; the
  // driver appends its own entries after them.
  [[gnu::always_inline]] void fill(PollTable& t) const {
    t.fds.clear();
    t.owner.clear();
    if (doorbell_fd_ >= 0) {
      t.fds.push_back(pollfd{doorbell_fd_, POLLIN, 0});
      t.owner.push_back(-1);
    }
    for (int q = 0; q < driver_.peer_count(); ++q) {
      const Link* link = driver_.watched_link(q);
      if (!link) continue;
      const LinkPoll watch = link->poll(driver_.has_sends(q));
      if (watch.fd < 0) continue;
      t.fds.push_back(pollfd{watch.fd, watch.events, 0});
      t.owner.push_back(q);
    }
    t.links_end = t.fds.size();
  }

  // ask_for_doorbells asks every watched user-space link's peer to ring
  // before the driver sleeps; true when one has bytes waiting already (do
  // not sleep). A peer that wrote just before it saw the request is not
  // missed: both sides order their flag and ring accesses with full
  // fences, and the driver's poll is its look once more. Every link is
  // asked, even once one has bytes waiting.
  [[gnu::always_inline]] bool ask_for_doorbells() {
    bool bytes_waiting = false;
    for (int q = 0; q < driver_.peer_count(); ++q) {
      Link* link = driver_.watched_link(q);
      if (!link || !link->moves_in_user_space()) continue;
      if (link->about_to_sleep(driver_.has_sends(q))) bytes_waiting = true;
    }
    return bytes_waiting;
  }
  // cancel_doorbells withdraws the request once awake.
  [[gnu::always_inline]] void cancel_doorbells() {
    for (int q = 0; q < driver_.peer_count(); ++q) {
      Link* link = driver_.watched_link(q);
      if (link && link->moves_in_user_space()) link->awake();
    }
  }

  // looks_this_turn: whether a turn that sleeps for `timeout_ms` (0: does
  // not sleep) calls poll(2); `turn` is the driver's count of its turns.
  // Spinning on user-space links alone, the descriptors (doorbell, the
  // peers' ends, wake-ups) need a look only every 16th turn: a poll(2) per
  // turn would cost more than the turn. The engine counts from each call
  // (a small message's exchange is over in fewer turns, and never polls),
  // the wire from its start.
  [[gnu::always_inline]] bool looks_this_turn(int timeout_ms, uint32_t& turn) const {
    return timeout_ms != 0 || !all_user_space_ || (++turn & 15) == 0;
  }

  // Look is what one look at the table found: poll(2)'s answer (0 for a
  // turn without a look), its errno when it failed, and whether the look
  // could sleep.
  struct Look {
    int rc = 0;
    int error = 0;
    bool slept = false;
  };
  // look looks at `t` once, sleeping up to `timeout_ms` (0: not at all,
  // -1: until something comes). Before a sleep it asks the user-space
  // links' peers for a doorbell, and does not sleep when one already has
  // bytes waiting; after it, it withdraws the request. `turn` is as
  // looks_this_turn's. `poll(fds, n, ms)`
  // makes the call, so that a driver may let its lock go while it sleeps.
  template <class Poll>
  [[gnu::always_inline]] Look look(PollTable& t, int timeout_ms, uint32_t& turn, Poll&& poll) {
    const bool asked = timeout_ms != 0 && any_user_space_;
    if (asked && ask_for_doorbells()) timeout_ms = 0;
    Look out;
    out.slept = timeout_ms != 0;
    if (looks_this_turn(timeout_ms, turn)) {
      out.rc = poll(t.fds.data(), static_cast<nfds_t>(t.fds.size()), timeout_ms);
      if (out.rc < 0) out.error = errno;
    }
    if (asked) cancel_doorbells();
    return out;
  }

  // serve handles what poll(2) found ready among the doorbell and links
  // (t's entries before links_end) and returns whether the doorbell rang:
  // it is drained, and the driver's next move reads what it rang for.
  [[gnu::always_inline]] bool serve(const PollTable& t) {
    bool rang = false;
    for (size_t i = 0; i < t.links_end && !driver_.stops_serving(); ++i) {
      if (!t.fds[i].revents) continue;
      if (t.owner[i] < 0) {
        drain_wake_ups(t.fds[i].fd);
        rang = true;
      } else {
        driver_.serve_link(t.owner[i], t.fds[i].revents);
      }
    }
    return rang;
  }

 private:
  Driver& driver_;
  const int doorbell_fd_;
  bool any_user_space_ = false;
  bool all_user_space_ = false;
};

}  // namespace cohort
