// transport.h: moving tagged byte ranges between the ranks of one group.
//
// engine.h implements it over per-peer links (link.h); connect_group.h
// builds one for a group.
//
// Algorithms talk only to this interface (never to a socket): they post a
// batch of sends and receives and wait for the batch to finish. Messages
// between two ranks arrive in the order they were sent. While waiting, a
// transport keeps reading whatever any peer sends (keeping unmatched
// messages aside), so two ranks that both send large messages to each other
// never deadlock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace cohort {

// MessageKind keeps collective traffic and users' point-to-point messages
// apart: a user's tag can never match a collective's.
// kFailure is the transport's own: a rank that fails tells the others why
// before it drops its connections, so they report the root cause.
// kFingerprint carries COHORT_DEBUG=detail's fingerprint of collective #n
// (tag n), which must never match nor be taken for collective #n's own.
enum class MessageKind : uint32_t { kCollective = 1, kPointToPoint = 2, kFailure = 3, kFingerprint = 4 };

constexpr int kAnySource = -1;

struct SendRequest {
  int peer;
  MessageKind kind;
  uint64_t tag;
  const void* data;
  size_t bytes;
};

struct RecvRequest {
  int peer;  // or kAnySource (point-to-point only)
  MessageKind kind;
  uint64_t tag;
  void* data;
  size_t bytes;     // the message must be exactly this long
  int source = -1;  // filled in: who sent it
  // on_arrival, when set, runs (inside exchange) as soon as this message is
  // in, while the rest of the batch is still in flight: a pipelined
  // algorithm reduces one segment while the next arrives. It may rewrite
  // the request (tag, data, bytes) and return true to post it again in the
  // same exchange, so that a few small buffers, which stay in cache, carry
  // a long series of segments.
  bool (*on_arrival)(void* context, RecvRequest& request) = nullptr;
  void* context = nullptr;
};

// Completion is called exactly once when a posted request finishes: with ok
// and the sending peer (receives), or with the error that ended it.
using Completion = std::function<void(const Status& status, int source)>;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // exchange posts every send and receive and returns when all completed,
  // or with an error naming the peer: kNetworkError when a peer's
  // connection dropped (with any peer: the group is then unusable),
  // kTimeout at `deadline` naming the peers still owed, kDesync when a
  // peer's message does not match what was expected (tag or size).
  // `what` names the operation for those messages ("all_reduce #5").
  virtual Status exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs,
                          Deadline deadline, const std::string& what) = 0;

  // post_send and post_recv start a request that completes later, during
  // exchange() or progress(), by calling `done` on the thread driving the
  // transport. The data must stay valid until then. `what` must outlive the
  // request. This is how isend/irecv never block the group's other work.
  virtual void post_send(const SendRequest& send, Deadline deadline, const std::string* what,
                         Completion done) = 0;
  virtual void post_recv(const RecvRequest& recv, Deadline deadline, const std::string* what,
                         Completion done) = 0;

  // has_pending is true while a posted request has not completed.
  virtual bool has_pending() const = 0;

  // progress drives posted requests until `until` passes, wake() is called,
  // or nothing is pending.
  virtual void progress(Deadline until) = 0;

  // wake makes a running progress() return. Thread-safe.
  virtual void wake() = 0;

  // interrupt fails every pending and later request at once with `reason`
  // (abort). Thread-safe.
  virtual void interrupt(const Status& reason) = 0;

  // peer_name describes a peer for messages: "rank 3 (10.0.0.3:4711)".
  virtual std::string peer_name(int peer) const = 0;

  // host_of names the host of `rank` by the lowest rank on it, so that
  // host_of(q) == q marks the host's leader. Without shared memory every
  // rank is its own host.
  virtual int host_of(int rank) const { return rank; }

  // ranks_per_cpu: the most ranks any machine of the group runs per CPU
  // they may use (1: each its own, or unknown), whatever memory they
  // share; the algorithm table prices a crowded machine's work by it.
  virtual double ranks_per_cpu() const { return 1.0; }

  // poll_health takes in what peers sent, without waiting, and returns the
  // error that ended this transport (a failure a peer reported, abort(),
  // ...); ok otherwise. A peer that only closed its connection is not an
  // error here: it may have left after doing its part. Algorithms that wait
  // outside exchange() (on shared memory) call it, and see dead peers by
  // their own means (shm: the process is gone).
  virtual Status poll_health() { return Status::ok_status(); }

  // peer_gone is true once `peer` closed its connection (seen by a
  // receive, progress or poll_health); the caller judges whether the peer
  // left before doing its part.
  virtual bool peer_gone(int peer) const {
    (void)peer;
    return false;
  }

  // lost_peers lists the peers whose connection ended while this rank was
  // still healthy: the first a rank learns of a dead peer. Only a
  // suspicion (a peer that failed for another reason and dropped its
  // connections before its report got through looks the same), which
  // shrink_group weighs against who actually shows up. Thread-safe.
  virtual std::vector<int> lost_peers() const { return {}; }

  // pace_by_share paces each TCP stream to another host to its share of
  // this host's link, as when every rank here sends to the other hosts at
  // once (an all_to_all): the link's rate over this host's ranks, split
  // among this rank's streams by the bytes each carries (bytes_to[q] to
  // rank q; equal splits, equal shares). An empty bytes_to lifts it.
  // Nothing when the link's rate is unknown (COHORT_LINK_GBITS unset).
  virtual void pace_by_share(const std::vector<size_t>& bytes_to) { (void)bytes_to; }
};

}  // namespace cohort
