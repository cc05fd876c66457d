#include "transport/link_kinds.h"

#include "common/logging.h"

namespace cohort {

std::string GroupMeeting::peer_name(int peer) const {
  return "rank " + std::to_string(peer) + " (" + addresses[static_cast<size_t>(peer)] + ")";
}

Status connect_by_kinds(const GroupMeeting& meeting, std::vector<std::unique_ptr<LinkKind>>& kinds,
                        ConnectedLinks& group) {
  const size_t size = static_cast<size_t>(meeting.size());
  for (auto& kind : kinds) {
    Status st = kind->set_up(meeting, group);
    if (!st.ok()) return st;
  }
  // Each peer to the first kind that reaches it; both ends decide alike.
  std::vector<std::vector<bool>> given(kinds.size(), std::vector<bool>(size, false));
  group.kinds.tried.clear();
  for (const auto& kind : kinds) group.kinds.tried.push_back(kind->name());
  group.kinds.of_peer.assign(size, "");
  for (int q = 0; q < meeting.size(); ++q) {
    if (q == meeting.rank) continue;
    size_t k = 0;
    while (k < kinds.size() && !kinds[k]->can_connect(q)) ++k;
    if (k == kinds.size())
      return Status(StatusCode::kBackendError, "no kind of link reaches " + meeting.peer_name(q));
    given[k][static_cast<size_t>(q)] = true;
    group.kinds.of_peer[static_cast<size_t>(q)] = kinds[k]->name();
    COHORT_LOG(kDebug) << "rank " << meeting.rank << " talks to " << meeting.peer_name(q) << " over "
                       << kinds[k]->name();
  }
  group.links.resize(size);
  for (size_t k = 0; k < kinds.size(); ++k) {
    Status st = kinds[k]->connect(meeting, given[k], group);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

}  // namespace cohort
