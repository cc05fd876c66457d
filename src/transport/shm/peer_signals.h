// peer_signals.h (shm): how the ranks of one arena wake each other and
// learn that one of them died, with no connection between any two.
//
// Each rank binds one Unix datagram socket, its doorbell, in /dev/shm
// beside the arena (a path, not the abstract namespace, so that ranks in
// different network namespaces that share /dev/shm reach it), and
// connects one unbound socket to every peer's doorbell. Once every rank
// has connected, each removes the doorbells' names: nothing is left in
// /dev/shm, and the connected sockets still reach them. A byte sent to a
// doorbell wakes a rank asleep in poll(2); the bytes only wake, so one
// poll(2) entry serves every peer of the host.
//
// A peer's death is its pidfd (pidfd_open(2)), readable once the process
// has exited: the end a TCP socket's EOF used to tell. A clean close is
// the ring's own flag (ring.h), which needs neither.
#pragma once

#include <string>
#include <vector>

#include "common/socket.h"
#include "common/status.h"

namespace cohort::shm {

class PeerSignals {
 public:
  PeerSignals() = default;
  ~PeerSignals();
  PeerSignals(PeerSignals&&) noexcept = default;
  PeerSignals& operator=(PeerSignals&&) noexcept = default;

  // doorbell_path names local rank `local`'s doorbell for the arena
  // segment `segment_name` ("/cohort-...").
  static std::string doorbell_path(const std::string& segment_name, int local);

  // bind makes this rank's doorbell at `path`.
  Status bind(const std::string& path);
  // connect_peers connects to every other local rank's doorbell (they are
  // all bound by now) and opens a pidfd of each of `pids` (pids[me] is
  // skipped). A peer already gone gets no pidfd: gone_before_watched
  // says so.
  Status connect_peers(const std::string& segment_name, int me, const std::vector<int>& pids);
  // forget_paths removes the doorbell names of all `local_size` ranks
  // (this rank's own and any that a peer killed since it bound left),
  // once every rank has connected to every doorbell.
  void forget_paths(const std::string& segment_name, int local_size);

  // wake_fd is this rank's doorbell, for poll(2); drain_wake_ups
  // (common/socket.h) takes its bytes.
  int wake_fd() const { return doorbell_.fd(); }
  // ring wakes local rank `local` (a byte to its doorbell; a full doorbell
  // already wakes it).
  void ring(int local) const;
  // death_fd is local rank `local`'s pidfd, readable once it exited; -1
  // when it was gone before this rank could watch it.
  int death_fd(int local) const;
  bool gone_before_watched(int local) const;

 private:
  Socket doorbell_;
  std::string bound_path_;                // until forget_paths
  std::vector<Socket> to_peer_;           // [local]: connected to its doorbell
  std::vector<Socket> death_;             // [local]: its pidfd
  std::vector<bool> gone_before_watched_;  // [local]
};

}  // namespace cohort::shm
