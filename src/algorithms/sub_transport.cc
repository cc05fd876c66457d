#include "algorithms/sub_transport.h"

#include <algorithm>

namespace cohort {

SubTransport::SubTransport(Transport& parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)), rank_(inner(parent.rank())) {}

int SubTransport::inner(int peer) const {
  auto it = std::lower_bound(members_.begin(), members_.end(), peer);
  return it != members_.end() && *it == peer ? static_cast<int>(it - members_.begin()) : -1;
}

std::string SubTransport::peer_name(int peer) const {
  return parent_.peer_name(outer(peer));
}

Status SubTransport::exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs,
                              Deadline deadline, const std::string& what) {
  sends_.assign(sends, sends + num_sends);
  recvs_.assign(recvs, recvs + num_recvs);
  for (auto& s : sends_) s.peer = outer(s.peer);
  for (auto& r : recvs_) r.peer = outer(r.peer);
  Status st = parent_.exchange(sends_.data(), sends_.size(), recvs_.data(), recvs_.size(), deadline, what);
  for (size_t i = 0; i < num_recvs; ++i) recvs[i].source = inner(recvs_[i].source);
  return st;
}

void SubTransport::post_send(const SendRequest& send, Deadline deadline, const std::string* what,
                             Completion done) {
  SendRequest s = send;
  s.peer = outer(s.peer);
  parent_.post_send(s, deadline, what, std::move(done));
}

void SubTransport::post_recv(const RecvRequest& recv, Deadline deadline, const std::string* what,
                             Completion done) {
  RecvRequest r = recv;
  r.peer = outer(r.peer);
  parent_.post_recv(r, deadline, what, [this, done = std::move(done)](const Status& st, int source) {
    done(st, source < 0 ? source : inner(source));
  });
}

}  // namespace cohort
