// link_kinds.h: the kinds of link a group's ranks reach each other by,
// tried in order for each peer: the first kind that can reach it makes
// its link. Shared memory first (the peers on this host, when the ranks
// share a /dev/shm and a pid namespace: shm/host_identity.h), then TCP,
// which reaches everyone. connect_group.cc builds the list and runs it;
// docs/extending.md says how to add a kind.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/status.h"
#include "transport/connect_group.h"
#include "transport/rank_place.h"

namespace cohort {

// GroupMeeting: what a kind's set-up sees of the group: its store
// (namespaced for it), this rank, the group's ranks in the job and every
// rank's published address (the TCP mesh's, joined first: it claims the
// rank's seat).
struct GroupMeeting {
  Store& store;
  int rank;
  const std::vector<int>& global_ranks;
  const std::vector<std::string>& addresses;
  const std::vector<RankPlace>& places;  // published with the addresses (rank_place.h)
  Deadline deadline;
  int size() const { return static_cast<int>(global_ranks.size()); }
  // peer_name: "rank 3 (10.0.0.3:4711)", as errors and logs name a peer.
  std::string peer_name(int peer) const;
};

class LinkKind {
 public:
  virtual ~LinkKind() = default;
  virtual const char* name() const = 0;
  // set_up: what the kind must learn with the whole group before it can
  // say whom it reaches. Every rank runs each kind's, in the list's order.
  virtual Status set_up(const GroupMeeting& meeting, ConnectedLinks& group) = 0;
  // can_connect: whether this kind reaches `peer`. Both ends must answer
  // alike, from what the set-up shared.
  virtual bool can_connect(int peer) const = 0;
  // connect: the links to `mine` (mine[q]: this kind was the first to
  // reach q), into group.links. Every rank runs each kind's, in order.
  virtual Status connect(const GroupMeeting& meeting, const std::vector<bool>& mine,
                         ConnectedLinks& group) = 0;
};

// connect_by_kinds sets up every kind, gives each peer to the first kind
// that reaches it and connects them: group.links and group.kinds are
// filled. A peer no kind reaches fails by name.
Status connect_by_kinds(const GroupMeeting& meeting, std::vector<std::unique_ptr<LinkKind>>& kinds,
                        ConnectedLinks& group);

}  // namespace cohort
