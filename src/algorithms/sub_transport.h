// sub_transport.h: a Transport view of some ranks of another, renumbered
// 0..n-1, so that an algorithm written for a whole group can run among a
// host's ranks or among the hosts' leaders (hierarchical collectives).
#pragma once

#include <vector>

#include "transport/transport.h"

namespace cohort {

class SubTransport : public Transport {
 public:
  // `members` are ranks of `parent`, ascending, including parent.rank().
  SubTransport(Transport& parent, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  Status exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs,
                  Deadline deadline, const std::string& what) override;
  void post_send(const SendRequest& send, Deadline deadline, const std::string* what,
                 Completion done) override;
  void post_recv(const RecvRequest& recv, Deadline deadline, const std::string* what,
                 Completion done) override;
  bool has_pending() const override { return parent_.has_pending(); }
  void progress(Deadline until) override { parent_.progress(until); }
  void wake() override { parent_.wake(); }
  void interrupt(const Status& reason) override { parent_.interrupt(reason); }
  std::string peer_name(int peer) const override;
  Status poll_health() override { return parent_.poll_health(); }
  bool peer_gone(int peer) const override { return parent_.peer_gone(outer(peer)); }
  // The lowest member on `rank`'s host, as the parent sees hosts.
  int host_of(int rank) const override;
  // The parent's: the members' machines are no less crowded than the group.
  double ranks_per_cpu() const override { return parent_.ranks_per_cpu(); }
  // The parent's lost peers that are members, renumbered.
  std::vector<int> lost_peers() const override;
  // bytes_to[q] for member q goes to the parent's rank of q; 0 for the rest.
  void pace_by_share(const std::vector<size_t>& bytes_to) override;

 private:
  int outer(int peer) const { return peer < 0 ? peer : members_[static_cast<size_t>(peer)]; }
  int inner(int peer) const;

  Transport& parent_;
  std::vector<int> members_;
  int rank_ = -1;
  std::vector<SendRequest> sends_;  // reused per exchange
  std::vector<RecvRequest> recvs_;
  mutable std::vector<int> host_of_;  // filled on the first host_of
};

}  // namespace cohort
