#include "algorithms/sub_transport.h"

#include <algorithm>
#include <utility>

namespace cohort {

SubTransport::SubTransport(Transport& parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)), rank_(inner(parent.rank())) {}

int SubTransport::inner(int peer) const {
  auto it = std::lower_bound(members_.begin(), members_.end(), peer);
  return it != members_.end() && *it == peer ? static_cast<int>(it - members_.begin()) : -1;
}

int SubTransport::host_of(int rank) const {
  if (host_of_.empty()) {
    // Members ascend, so the first member seen on a parent host is its lowest.
    std::vector<std::pair<int, int>> first_on;  // (parent host, inner rank)
    host_of_.resize(members_.size());
    for (size_t i = 0; i < members_.size(); ++i) {
      int host = parent_.host_of(members_[i]);
      auto it = std::find_if(first_on.begin(), first_on.end(), [&](const auto& p) { return p.first == host; });
      if (it == first_on.end()) it = first_on.insert(first_on.end(), {host, static_cast<int>(i)});
      host_of_[i] = it->second;
    }
  }
  return host_of_[static_cast<size_t>(rank)];
}

std::vector<int> SubTransport::lost_peers() const {
  std::vector<int> lost;
  for (int peer : parent_.lost_peers()) {
    int mine = inner(peer);
    if (mine >= 0) lost.push_back(mine);
  }
  return lost;
}

void SubTransport::pace_by_share(const std::vector<size_t>& bytes_to) {
  if (bytes_to.empty()) return parent_.pace_by_share({});
  std::vector<size_t> outer_bytes(static_cast<size_t>(parent_.size()), 0);
  for (size_t q = 0; q < bytes_to.size() && q < members_.size(); ++q) {
    outer_bytes[static_cast<size_t>(members_[q])] = bytes_to[q];
  }
  parent_.pace_by_share(outer_bytes);
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
