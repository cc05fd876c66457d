// wire.h: messages of any size, each whole, between the workers of a job,
// over the transport's links (link.h): RPC's carrier (src/torch/rpc/).
//
// The engine (engine.h) is the collectives' driver of links: a receive is
// posted before its message, with its size, and a peer that leaves while
// it is needed ends the whole group. RPC needs the opposite: a message
// nobody waited for, of a size only its sender knew, and a worker that
// dies fails only what depended on it while the others go on calling each
// other. So the wire drives the same links with its own thread and its
// own framing, and waits on them as the engine does (link_loop.h):
//
//   WireHeader | head (head_bytes) | body (body_bytes)
//
// The head is small and read into a vector; from it the receiver (a
// WireHandler) says where the body goes (for RPC: the storage of freshly
// made tensors), so that the body's bytes go from the link straight into
// place. The sender's body is a list of byte ranges that it keeps alive
// until sent (tensors' storage): neither side copies it into a buffer.
#pragma once

#include <poll.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/status.h"
#include "transport/link.h"
#include "transport/link_loop.h"

namespace cohort {
namespace shm {
class Arena;
}

constexpr uint32_t kWireMagic = 0x52504331;  // "RPC1"

struct WireHeader {
  uint32_t magic = kWireMagic;
  uint32_t type = 0;  // the handler's message type
  uint64_t id = 0;    // the handler's (a call's number, ...)
  uint64_t head_bytes = 0;
  uint64_t body_bytes = 0;
};

// OutMessage is what a sender hands the wire. `body`'s ranges must stay
// valid until the message is written or dropped; keep_alive owns them.
struct OutMessage {
  uint32_t type = 0;
  uint64_t id = 0;
  std::vector<uint8_t> head;
  std::vector<iovec> body;
  std::shared_ptr<void> keep_alive;
};

// InMessage is what arrives: the head, and the body in the places that
// WireHandler::on_head chose (owned by keep_alive).
struct InMessage {
  WireHeader header;
  std::vector<uint8_t> head;
  std::vector<iovec> body;
  std::shared_ptr<void> keep_alive;
};

// WireHandler is told what arrives, on the wire's thread (or on a sender's
// thread, for a message to itself): keep each call short.
class WireHandler {
 public:
  virtual ~WireHandler() = default;
  // on_head sets m.body (ranges adding up to m.header.body_bytes) and
  // m.keep_alive; an error (a head that makes no sense) ends the link to
  // that peer, which is then lost.
  virtual Status on_head(int peer, InMessage& m) = 0;
  virtual void on_message(int peer, InMessage m) = 0;
  // on_peer_lost is called once per peer whose link ended (closed,
  // broken, or sent garbage), with a status naming it.
  virtual void on_peer_lost(int peer, const Status& why) = 0;
};

class MessageWire {
 public:
  // connect joins `size` workers through `store` (namespaced for them):
  // shared memory with those on this host, TCP with the others, every
  // connection made now. Calls no handler before start().
  static Result<std::unique_ptr<MessageWire>> connect(Store& store, int rank, int size,
                                                      const std::string& address, Deadline deadline);
  ~MessageWire();
  MessageWire(const MessageWire&) = delete;
  MessageWire& operator=(const MessageWire&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // peer_name: "rank 3 (10.0.0.3:4711)".
  std::string peer_name(int peer) const;
  bool shares_memory_with(int peer) const;

  // start runs the wire's thread, which calls `handler` until stop().
  void start(WireHandler* handler);
  // send queues `m` for `peer` (any thread; in order per peer). A message
  // to this rank itself is delivered on the caller's thread, its body
  // copied. Fails naming the peer when its link has ended.
  Status send(int peer, OutMessage m);
  // Driving: any thread may turn the wire (read what came, write what is
  // queued) instead of leaving it to the wire's own thread, which then
  // keeps out of the way: a caller that waits for its answer reads it
  // itself, and an idle worker thread that reads a call runs it, with no
  // hand-off between threads (each costs microseconds, or a wake-up's
  // tens). enter_driving/leave_driving bracket a spell of drive_once
  // calls (hand_back false: this thread will be back at once, so the
  // wire's thread is not woken); drive_once is one turn that never sleeps, false when another
  // thread is turning the wire just now. Handlers run on the driving
  // thread.
  void enter_driving();
  void leave_driving(bool hand_back = true);
  bool drive_once();

  // stop ends every link (the peers see this worker leave) and joins the
  // thread. Messages still queued are dropped.
  void stop();

 private:
  struct Outgoing {
    WireHeader header;
    OutMessage message;
    size_t sent = 0;  // of header + head + body
  };
  struct Inbound {
    WireHeader header;
    size_t header_got = 0;
    int stage = 0;  // 0: header, 1: head, 2: body
    InMessage message;
    size_t got = 0;      // of the head, or of the current body range
    size_t segment = 0;  // the body range being filled
  };
  struct Peer {
    std::unique_ptr<Link> link;
    // Sends are written by whichever thread gets there first: the
    // sender's own when the queue is empty (no hand-off to the wire's
    // thread on the way out), else the wire's thread, in order.
    std::mutex send_mu;
    std::deque<Outgoing> sends;  // guarded by send_mu
    std::atomic<bool> has_sends{false};
    Inbound in;  // the wire thread's
    bool lost = false;  // the wire thread's
  };

  MessageWire(int rank, int size, std::vector<std::unique_ptr<Link>> links, std::shared_ptr<shm::Arena> arena,
              bool spin_bare, int doorbell_fd, std::vector<std::string> addresses);
  void run();
  // run()'s steps, defined inline in wire.cc (their only user).
  // wait_out_drivers sleeps up to kDriversLookMs while other threads drive
  // the wire (the last to leave rings).
  inline void wait_out_drivers();
  // announce_sleep tells the senders that this thread is about to sleep
  // (they ring from now on); false when something is already waiting, so
  // it must not. The links' look (link_loop.h) asks the shared-memory
  // peers for their doorbell.
  inline bool announce_sleep();
  // With drive_mu_ held: move what the links can move now (queued sends,
  // shared-memory reads).
  bool move_locked();

  // What links_ (link_loop.h) asks of its driver; with drive_mu_ held.
  friend class LinkLoop<MessageWire>;
  int peer_count() const { return size_; }
  Link* watched_link(int q) const {
    const Peer& p = peers_[static_cast<size_t>(q)];
    return p.link && !p.lost ? p.link.get() : nullptr;
  }
  bool has_sends(int q) const { return peers_[static_cast<size_t>(q)].has_sends.load(std::memory_order_relaxed); }
  // serve_link handles peer q's descriptor that poll(2) found ready: a
  // broken link loses that peer alone.
  void serve_link(int q, short revents);
  bool stops_serving() const { return false; }
  static Outgoing prepare(OutMessage m);
  void queue(int peer, OutMessage m);
  // write_locked writes what it can of peer's queue (send_mu held); false
  // once the link failed, with *failure saying why.
  bool write_locked(Peer& p, int peer, bool* moved, Status* failure);
  bool write_to(int peer, bool* moved);
  bool read_from(int peer, bool* moved);
  Status take_in(int peer, size_t n);
  void lose(int peer, const Status& why);
  void deliver_to_self(OutMessage m);
  void ring();

  const int rank_;
  const int size_;
  std::vector<Peer> peers_;
  std::shared_ptr<shm::Arena> arena_;
  bool spin_bare_;
  std::vector<std::string> addresses_;
  WireHandler* handler_ = nullptr;
  std::thread thread_;
  int wake_fd_ = -1;
  std::atomic<bool> started_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> asleep_{false};
  std::mutex drive_mu_;  // held by whichever thread turns the wire
  // Waiting on every link at once: shared memory's doorbell (for all its
  // links: EngineOptions::doorbell_fd) and the links; guarded by drive_mu_.
  LinkLoop<MessageWire> links_;
  PollTable table_;  // drive_once's; guarded by drive_mu_
  uint32_t turn_ = 0;  // its turns, for LinkLoop::looks_this_turn; guarded by drive_mu_
  std::atomic<int> drivers_{0};
  std::atomic<bool> waiting_for_drivers_{false};
  std::unique_ptr<std::atomic<bool>[]> lost_;  // read by senders
};

}  // namespace cohort
