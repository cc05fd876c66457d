#include "transport/shm/link_kind.h"

#include "transport/shm/connect.h"
#include "transport/shm/link.h"

namespace cohort::shm {
namespace {

class ShmLinkKind : public LinkKind {
 public:
  const char* name() const override { return "shared memory"; }

  // The hosts, from the identities the ranks published with their
  // addresses, then this host's arena (null when no other rank of the
  // group is here, or when every rank here failed to make it).
  Status set_up(const GroupMeeting& meeting, ConnectedLinks& group) override {
    group.options.host_of = host_leaders(meeting.places, meeting.global_ranks);
    auto arena = connect_host(meeting.store, meeting.rank, group.options.host_of, meeting.places, meeting.deadline);
    if (!arena.ok()) return arena.status();
    arena_ = arena.value();
    group.arena = arena_;
    if (arena_) {
      group.options.spin_bare = !arena_->oversubscribed();
      group.options.doorbell_fd = arena_->signals().wake_fd();
    }
    return Status::ok_status();
  }

  bool can_connect(int peer) const override { return arena_ && arena_->local_index_of(peer) >= 0; }

  Status connect(const GroupMeeting& meeting, const std::vector<bool>& mine, ConnectedLinks& group) override {
    for (int q = 0; q < meeting.size(); ++q) {
      if (!mine[static_cast<size_t>(q)]) continue;
      group.links[static_cast<size_t>(q)] = std::make_unique<ShmLink>(
          arena_, arena_->local_index_of(q), meeting.addresses[static_cast<size_t>(q)], meeting.peer_name(q));
    }
    return Status::ok_status();
  }

 private:
  std::shared_ptr<Arena> arena_;
};

}  // namespace

std::unique_ptr<LinkKind> shm_link_kind() {
  return std::make_unique<ShmLinkKind>();
}

}  // namespace cohort::shm
