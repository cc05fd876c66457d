// transport.h (tcp): the Transport over one TCP connection per peer.
//
// Framing: a 24-byte header (magic, kind, tag, length) then the payload.
// Payloads go from the sender's buffer (sendmsg) straight into the posted
// receive buffer when one matches; only messages that arrive before their
// receive is posted are copied (into a queue of unexpected messages).
// Driven by one thread at a time (the group's worker); wake() and
// interrupt() may come from any thread.
//
// Peers on the same host (attach_shm) exchange the very same frames through
// shared-memory rings instead of the socket: the matching, unexpected
// messages, deadlines and failure reports below are shared. Their socket
// stays open for two things only: a doorbell byte that wakes a rank asleep
// in poll(2), and the end-of-file that tells that the peer process is gone.
#pragma once

#include <atomic>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "common/socket.h"
#include "transport/shm/arena.h"
#include "transport/tcp/hello.h"
#include "transport/transport.h"

namespace cohort::tcp {

class TcpTransport : public Transport {
 public:
  // `sockets[q]` is connected to peer q (invalid for this rank's own slot);
  // `addresses[q]` describes it for messages.
  TcpTransport(int rank, int size, std::vector<Socket> sockets, std::vector<std::string> addresses);
  // Lazy: no connection yet; each is made the first time a rank sends to a
  // peer, through `listener` and the peers' `addresses` (lazy_connect.cc),
  // each side showing and checking `credentials` (hello.h).
  TcpTransport(int rank, int size, Socket listener, std::vector<std::string> addresses,
               GroupCredentials credentials);
  ~TcpTransport() override;

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
  shm::Arena* shared_arena() override { return arena_.get(); }
  int host_of(int rank) const override {
    return host_of_.empty() ? rank : host_of_[static_cast<size_t>(rank)];
  }
  // set_hosts records every rank's host (its lowest rank), for host_of().
  void set_hosts(std::vector<int> host_of) { host_of_ = std::move(host_of); }
  Status poll_health() override;
  bool peer_gone(int peer) const override { return !peers_[static_cast<size_t>(peer)].closed.ok(); }
  std::vector<int> lost_peers() const override;

  // attach_shm routes the messages of the peers in `arena` (this host's
  // ranks of the group) through its rings from now on. Eager only; call
  // before any message is sent.
  void attach_shm(std::unique_ptr<shm::Arena> arena);

 private:
  struct Header {
    uint32_t magic;
    uint32_t kind;
    uint64_t tag;
    uint64_t bytes;
  };
  static_assert(sizeof(Header) == 24, "the header is sent as it is laid out");

  // Unexpected is a message that came before its receive was posted. Its
  // bytes live in a buffer from spare_, not zero-filled: a faster peer
  // sends the next step's segments early all the time, and a fresh
  // allocation each (mmap, page faults, zeroing) cost more than the copy.
  struct Unexpected {
    MessageKind kind;
    uint64_t tag;
    std::unique_ptr<uint8_t[]> data;
    size_t size;
    size_t capacity;
  };

  struct PostedRecv {
    RecvRequest request;
    Deadline deadline;
    const std::string* what;
    Completion done;
  };

  struct OutgoingSend {
    Header header;
    const uint8_t* data;
    size_t bytes;
    size_t sent;  // of header + payload
    Deadline deadline;
    const std::string* what;
    Completion done;
  };

  // Link is the state of the connection to a peer. Eager transports start
  // kReady; lazy ones kIdle. The first send to an idle peer connects and
  // says hello (kInitiated) and waits for the peer's one-byte answer; if
  // both sides connect at once, the connection the lower rank made wins and
  // the other side waits for it (kAwaitPeer).
  enum class Link { kReady, kIdle, kInitiated, kAwaitPeer };

  struct Peer {
    Link link = Link::kReady;
    Socket socket;
    std::string address;
    // Receiving: the header being read, then the payload being read into
    // either a posted receive or an unexpected message.
    Header header{};
    size_t header_got = 0;
    bool in_body = false;
    uint8_t* body = nullptr;
    size_t body_got = 0;
    std::unique_ptr<PostedRecv> body_recv;
    std::unique_ptr<Unexpected> body_unexpected;
    std::deque<Unexpected> unexpected;
    std::deque<OutgoingSend> sends;  // in order
    // Same-host peers: the rings to and from it, and its index in arena_.
    shm::Ring out_ring;
    shm::Ring in_ring;
    int local = -1;
    bool uses_shm() const { return local >= 0; }
    // Set once the peer closed its end: what it sent before is still
    // delivered (a peer that finished first may close), but anything that
    // needs it from now on fails with this.
    Status closed;
  };

  // A connection accepted from a peer that has not said who it is yet.
  struct Handshake {
    Socket socket;
    std::vector<uint8_t> hello;  // as received so far
  };

  // lazy_connect.cc: making connections on first use.
  void start_link(int peer, Deadline deadline);
  Status read_ack(int peer);
  void accept_links();
  Status read_handshake(size_t index);

  // drive runs the I/O loop until `finished()` is true, `until` passes or a
  // wake-up arrives; returns false when woken or out of time.
  template <class Finished>
  bool drive(Finished finished, Deadline until, bool stop_on_wake);

  Status read_from(int peer);
  // drain_socket reads a same-host peer's doorbell bytes and notices when
  // its socket closed; ring_doorbell wakes a same-host peer asleep in poll.
  Status drain_socket(int peer);
  void ring_doorbell(int peer);
  // shm_ready is true when a same-host ring has bytes to read or room for
  // a pending send (checked before sleeping).
  bool shm_ready() const;
  void peer_closed(int peer, Status why);
  // lost notes that peer's connection ended (closed or failed) while this
  // rank was healthy, for lost_peers(), and returns `why`.
  Status lost(int peer, Status why);
  Status start_body(int peer);
  void finish_body(int peer);
  Status write_to(int peer);
  bool has_queued_sends() const;
  Status write_queued();
  Status take_unexpected(PostedRecv* recv, bool* matched);
  void expire(Clock::time_point now);
  // unmatched_tag explains a point-to-point receive that timed out, or
  // whose peer left, while a message from that peer with another tag waits
  // unmatched: a DesyncError naming both tags (unmatched.cc); ok when there
  // is none.
  Status unmatched_tag(const PostedRecv& recv) const;
  // check_interrupt fails the transport when interrupt() was called.
  void check_interrupt();
  // take_buffer returns a buffer of at least n bytes (from spare_ when one
  // fits); give_back keeps a few for reuse.
  std::unique_ptr<uint8_t[]> take_buffer(size_t n, size_t* capacity);
  void give_back(std::unique_ptr<uint8_t[]> buffer, size_t capacity);
  // fail completes every pending request with `status` and refuses new
  // ones; with tell_peers, it also sends the peers the reason and drops the
  // connections, so that they fail at once too.
  void fail(const Status& status, bool tell_peers = true);
  // finish_half_sent sends the rest of peer q's partly sent message before
  // `deadline` (fail() does, so that its report can follow on the stream).
  void finish_half_sent(int peer, Deadline deadline);
  Deadline earliest_deadline() const;
  std::string owed_peers() const;

  const int rank_;
  const int size_;
  std::vector<Peer> peers_;
  // lost_[q]: q's connection ended while this rank was healthy (read by
  // other threads through lost_peers()).
  std::unique_ptr<std::atomic<bool>[]> lost_;
  bool reading_after_send_error_ = false;         // write_to's look for a peer's last report
  std::list<std::unique_ptr<PostedRecv>> recvs_;  // posted, not yet matched, in posting order
  size_t pending_ = 0;                            // posted requests not yet completed
  std::vector<std::pair<size_t, std::unique_ptr<uint8_t[]>>> spare_;  // capacity, buffer
  size_t spin_us_ = 0;
  int wake_fd_ = -1;  // eventfd written by wake() and interrupt()
  Socket listener_;   // lazy transports: where peers connect
  std::vector<Handshake> handshakes_;
  GroupCredentials credentials_;  // lazy transports: what hellos show and expect
  Status failed_;  // once set, every request fails with it
  std::unique_ptr<shm::Arena> arena_;
  std::vector<int> host_of_;
  bool all_shm_ = false;    // every peer is on this host
  uint64_t shm_moves_ = 0;  // counts ring reads and writes that moved bytes

  std::mutex interrupt_mu_;
  Status interrupt_reason_;  // guarded by interrupt_mu_
  std::atomic<bool> interrupted_{false};
};

}  // namespace cohort::tcp
