// Why a point-to-point receive timed out (or its peer left without sending
// it): when the peer sent a message with another tag that nothing received,
// the tags differ between the ranks (a desync), and saying so beats "timed
// out" or "closed its connection".
#include <string>

#include "transport/tcp/transport.h"

namespace cohort::tcp {

Status TcpTransport::unmatched_tag(const PostedRecv& recv) const {
  const RecvRequest& r = recv.request;
  if (r.kind != MessageKind::kPointToPoint) return Status::ok_status();
  for (int q = 0; q < size_; ++q) {
    if (r.peer != kAnySource && r.peer != q) continue;
    for (const Unexpected& u : peers_[static_cast<size_t>(q)].unexpected) {
      if (u.kind != MessageKind::kPointToPoint || u.tag == r.tag) continue;
      // Tags travel as the int the user gave, sign-extended.
      return Status(StatusCode::kDesync, *recv.what + ": " + peer_name(q) + " sent a message with tag " +
                                             std::to_string(static_cast<int64_t>(u.tag)) + " (" +
                                             std::to_string(u.size) +
                                             " bytes) that no receive matched; this rank waited for tag " +
                                             std::to_string(static_cast<int64_t>(r.tag)) + " (" +
                                             std::to_string(r.bytes) + " bytes)");
    }
  }
  return Status::ok_status();
}

}  // namespace cohort::tcp
