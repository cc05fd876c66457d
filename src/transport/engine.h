// engine.h: the Transport, written once over per-peer links (link.h).
//
// Posting, tag matching, the queue of unexpected messages, deadlines and
// failure relay live here; how bytes reach a peer is the link's business
// (tcp/link.h, shm/link.h). Payloads go from the sender's buffer straight
// into the posted receive buffer when one matches; only messages that
// arrive before their receive is posted are copied aside. Driven by one
// thread at a time (the group's worker); wake() and interrupt() may come
// from any thread.
//
// No allocation per message once warm: posted receives come from a pool
// and sit on an intrusive list, sends and unexpected messages in Fifos,
// unexpected payloads in reused buffers, exchange()'s bookkeeping in the
// requests themselves (no std::function), poll(2)'s table in members.
//
// The code is split by what it does: engine.cc (posting, exchange,
// completion), matching.cc (which receive a frame belongs to, and the
// desyncs that matching finds), streams.cc (frames in and out of links),
// progress_loop.cc (the loop that waits on every link), failure_relay.cc
// (failing, telling the peers why, deadlines).
#pragma once

#include <poll.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/fifo.h"
#include "transport/frame.h"
#include "transport/link.h"
#include "transport/link_loop.h"
#include "transport/transport.h"

namespace cohort {

struct EngineOptions {
  // host_of[q]: the lowest rank on q's host (empty: every rank its own).
  std::vector<int> host_of;
  // spin_bare lets a quiet spell start with a spin that does not yield the
  // core: only when every rank here has a core of its own, since a yield
  // (a system call) costs more than a small message's trip.
  bool spin_bare = false;
  // The host's network link rate in bytes a second (0: unknown), for
  // pace_by_share.
  uint64_t link_bytes_per_second = 0;
  // ranks_per_cpu: the most ranks any machine of the group runs a CPU
  // (rank_place.h), for the algorithm table.
  double ranks_per_cpu = 1.0;
  // doorbell_fd wakes this rank for all its user-space links at once (the
  // shared-memory doorbell, shm/peer_signals.h); -1: none. Its bytes only
  // wake: the engine polls it while it sleeps and drains it. The links'
  // owner (the arena) keeps it open as long as the links live.
  int doorbell_fd = -1;
};

class Engine : public Transport {
 public:
  // links[q] carries the messages to and from peer q (null for this
  // rank); `acceptor`, when links are made on first use, takes the
  // connections peers make to this rank.
  Engine(int rank, int size, std::vector<std::unique_ptr<Link>> links, std::unique_ptr<Acceptor> acceptor,
         EngineOptions options);
  ~Engine() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs,
                  Deadline deadline, const std::string& what) override;
  void post_send(const SendRequest& send, Deadline deadline, const std::string* what,
                 Completion done) override;
  void post_recv(const RecvRequest& recv, Deadline deadline, const std::string* what,
                 Completion done) override;
  bool has_pending() const override;
  void progress(Deadline until) override;
  void wake() override;
  void interrupt(const Status& reason) override;
  std::string peer_name(int peer) const override;
  int host_of(int rank) const override {
    return host_of_.empty() ? rank : host_of_[static_cast<size_t>(rank)];
  }
  double ranks_per_cpu() const override { return ranks_per_cpu_; }
  Status poll_health() override;
  bool peer_gone(int peer) const override { return !peers_[static_cast<size_t>(peer)].closed.ok(); }
  std::vector<int> lost_peers() const override;
  void pace_by_share(const std::vector<size_t>& bytes_to) override;

 private:
  // Batch is one exchange() call's count of requests still open and its
  // first error; its requests point at it instead of carrying a closure.
  struct Batch {
    size_t remaining = 0;
    Status first_error;
  };

  // PostedRecv is a receive waiting for its message, on recvs_ in posting
  // order (any-source receives match in that order) or, while its payload
  // arrives, a peer's body_recv. Pooled.
  struct PostedRecv {
    RecvRequest request;
    Deadline deadline = Deadline::never();
    const std::string* what = nullptr;
    Completion done;             // post_recv's
    Batch* batch = nullptr;      // exchange's: completes into the batch
    RecvRequest* out = nullptr;  // exchange's: the caller's request
    PostedRecv* prev = nullptr;
    PostedRecv* next = nullptr;
  };

  struct OutgoingSend {
    FrameHeader header;
    const uint8_t* data = nullptr;
    size_t bytes = 0;
    size_t sent = 0;  // of header + payload
    Deadline deadline = Deadline::never();
    const std::string* what = nullptr;
    Completion done;
    Batch* batch = nullptr;
  };

  // Unexpected is a message that came before its receive was posted. Its
  // bytes live in a buffer from spare_, not zero-filled: a faster peer
  // sends the next step's segments early all the time, and a fresh
  // allocation each (mmap, page faults, zeroing) cost more than the copy.
  struct Unexpected {
    MessageKind kind = MessageKind::kCollective;
    uint64_t tag = 0;
    std::unique_ptr<uint8_t[]> data;
    size_t size = 0;
    size_t capacity = 0;
  };

  struct Peer {
    std::unique_ptr<Link> link;  // null for this rank
    // Receiving: the header being read, then the payload being read into
    // either a posted receive or an unexpected message.
    FrameHeader header{};
    size_t header_got = 0;
    bool in_body = false;
    uint8_t* body = nullptr;
    size_t body_got = 0;
    PostedRecv* body_recv = nullptr;
    bool body_is_unexpected = false;
    Unexpected body_unexpected;
    Fifo<Unexpected> unexpected;
    Fifo<OutgoingSend> sends;  // in order
    // Set once the peer closed its end: what it sent before is still
    // delivered (a peer that finished first may close), but anything that
    // needs it from now on fails with this.
    Status closed;
  };

  // engine.cc
  PostedRecv* take_recv();
  void release_recv(PostedRecv* r);
  void link_recv(PostedRecv* r);    // at the end of recvs_
  void unlink_recv(PostedRecv* r);  // from recvs_
  // start_recv matches a receive against what already came, or posts it.
  void start_recv(PostedRecv* r);
  void start_send(int peer, OutgoingSend send);
  void complete_recv(PostedRecv* r, const Status& status, int source);
  void complete_send(OutgoingSend& s, const Status& status);
  // check_interrupt fails the transport when interrupt() was called.
  void check_interrupt();

  // matching.cc
  Status take_unexpected(PostedRecv* recv, bool* matched);
  // adopt_arriving moves a message that is arriving right now into an
  // unexpected buffer over to `recv` when it matches; true if it did.
  bool adopt_arriving(PostedRecv* recv, Status* error);
  Status start_body(int peer);
  void finish_body(int peer);
  // unmatched_tag explains a point-to-point receive that timed out, or
  // whose peer left, while a message from that peer with another tag waits
  // unmatched: a DesyncError naming both tags; ok when there is none.
  Status unmatched_tag(const PostedRecv& recv) const;
  // take_buffer returns a buffer of at least n bytes (from spare_ when one
  // fits); give_back keeps a few for reuse.
  std::unique_ptr<uint8_t[]> take_buffer(size_t n, size_t* capacity);
  void give_back(std::unique_ptr<uint8_t[]> buffer, size_t capacity);

  // streams.cc
  Status read_from(int peer);
  Status write_to(int peer);
  bool has_queued_sends() const;
  Status write_queued();
  void peer_closed(int peer, Status why);

  // progress_loop.cc: drive runs the loop until `finished()` is true,
  // `until` passes or a wake-up arrives; returns false when woken or out
  // of time.
  template <class Finished>
  bool drive(Finished finished, Deadline until, bool stop_on_wake);
  // move_user_space_links moves what the shared-memory links can move now.
  void move_user_space_links();
  // drive's steps, defined inline in progress_loop.cc (its only user).
  // fill_poll_table fills table_ for one turn: the doorbell and the links
  // (links_), then the acceptor's descriptors, then wake_fd_ last.
  inline void fill_poll_table();
  // drain_wake_fd consumes wake()'s and interrupt()'s count.
  inline void drain_wake_fd();
  // serve_ready_fds handles what poll(2) found ready: the doorbell and the
  // links, then the acceptor's `accepting` entries.
  inline void serve_ready_fds(size_t accepting);

  // What links_ (link_loop.h) asks of its driver.
  friend class LinkLoop<Engine>;
  int peer_count() const { return size_; }
  Link* watched_link(int q) const {
    const Peer& p = peers_[static_cast<size_t>(q)];
    return p.link && p.closed.ok() ? p.link.get() : nullptr;
  }
  bool has_sends(int q) const { return !peers_[static_cast<size_t>(q)].sends.empty(); }
  // serve_link handles peer q's descriptor that poll(2) found ready.
  void serve_link(int q, short revents);
  bool stops_serving() const { return !failed_.ok(); }

  // failure_relay.cc
  // fail completes every pending request with `status` and refuses new
  // ones; with tell_peers, it also sends the peers the reason and drops the
  // links, so that they fail at once too.
  void fail(const Status& status, bool tell_peers = true);
  // finish_half_sent sends the rest of peer q's partly sent message before
  // `deadline` (fail() does, so that its report can follow on the stream).
  void finish_half_sent(int peer, Deadline deadline);
  // lost notes that peer's link ended (closed or failed) while this rank
  // was healthy, for lost_peers(), and returns `why`.
  Status lost(int peer, Status why);
  void expire(Clock::time_point now);
  Deadline earliest_deadline() const;
  std::string owed_peers() const;

  const int rank_;
  const int size_;
  std::vector<Peer> peers_;
  std::unique_ptr<Acceptor> acceptor_;
  std::vector<int> host_of_;
  double ranks_per_cpu_;
  bool spin_bare_ = false;
  uint64_t link_bytes_per_second_ = 0;  // pace_by_share's; 0: unknown
  // lost_[q]: q's link ended while this rank was healthy (read by other
  // threads through lost_peers()).
  std::unique_ptr<std::atomic<bool>[]> lost_;
  bool reading_after_send_error_ = false;  // write_to's look for a peer's last report
  PostedRecv* recvs_head_ = nullptr;       // posted, not yet matched, in posting order
  PostedRecv* recvs_tail_ = nullptr;
  std::vector<std::unique_ptr<PostedRecv>> recv_pool_;  // every PostedRecv made
  std::vector<PostedRecv*> free_recvs_;
  size_t pending_ = 0;                                                // posted requests not yet completed
  std::vector<std::pair<size_t, std::unique_ptr<uint8_t[]>>> spare_;  // capacity, buffer
  size_t spin_us_ = 0;
  int wake_fd_ = -1;               // eventfd written by wake() and interrupt()
  // Waiting on every link at once: the doorbell (EngineOptions::doorbell_fd)
  // and the links, and which of them move in user space.
  LinkLoop<Engine> links_;
  Status failed_;                  // once set, every request fails with it
  uint64_t user_space_moves_ = 0;  // counts link passes that moved bytes without a system call
  // progress_loop.cc's poll(2) table, kept between turns so that a turn
  // allocates nothing.
  PollTable table_;
  std::vector<int> became_ready_;

  std::mutex interrupt_mu_;
  Status interrupt_reason_;  // guarded by interrupt_mu_
  std::atomic<bool> interrupted_{false};
};

}  // namespace cohort
