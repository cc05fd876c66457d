// failure_relay.cc: failing the group, telling the peers why, and the
// deadlines that fail it.
//
// A rank that fails sends every peer the reason as a last frame and then
// ends its links, so that the others fail at once naming the root cause
// instead of waiting for their timeout. The reason travels as fields
// (common/relayed_cause.h): relayed on, it keeps naming the rank that saw
// the cause first, and each rank words it once, for itself.
#include <algorithm>
#include <cstring>

#include "common/relayed_cause.h"
#include "transport/engine.h"

namespace cohort {

Status Engine::lost(int q, Status why) {
  // Only while this rank is healthy: once it failed, it ended its own
  // links, and what it reads afterwards says nothing of the peer.
  if (failed_.ok() && !interrupted_.load()) lost_[q].store(true);
  return why;
}

void Engine::fail(const Status& status, bool tell_peers) {
  if (failed_.ok() && !tell_peers) failed_ = status;
  if (failed_.ok()) {
    failed_ = status;
    const std::vector<uint8_t> cause = encode_cause(cause_to_relay(status, rank_));
    FrameHeader h{kFrameMagic, static_cast<uint32_t>(MessageKind::kFailure), 0, cause.size()};
    std::vector<uint8_t> frame(sizeof h + cause.size());
    std::memcpy(frame.data(), &h, sizeof h);
    std::memcpy(frame.data() + sizeof h, cause.data(), cause.size());
    const Deadline report_deadline = Deadline::after(std::chrono::milliseconds(100));
    for (int q = 0; q < size_; ++q) {
      Peer& p = peers_[q];
      if (!p.link) continue;
      const bool usable = p.closed.ok() && p.link->ready();
      // A message half sent is finished first (the peer is most likely
      // reading it: it waits for this rank), so that the report can
      // follow; otherwise the peer would see the link end mid-message and
      // take this rank, not the cause, for dead. A ring takes it only if it
      // has room now.
      if (usable && !p.sends.empty() && p.sends.front().sent > 0) {
        finish_half_sent(q, report_deadline);
      }
      // Whole or not at all: a cut-off frame would only confuse the peer.
      const bool between_messages = p.sends.empty() || p.sends.front().sent == 0 ||
                                    p.sends.front().sent == sizeof(FrameHeader) + p.sends.front().bytes;
      if (usable && between_messages) {
        Status ignored = p.link->write_whole(frame.data(), frame.size(), report_deadline);
        (void)ignored;
        p.link->moved();
      }
      // A shared-memory peer learns of the frame (or the failure) from its
      // ring's closed flag (and the doorbell that shut_down rings), and
      // reads its ring to the end first.
      p.link->shut_down();
    }
  }
  // Complete everything still pending, exactly once each.
  PostedRecv* r = recvs_head_;
  recvs_head_ = recvs_tail_ = nullptr;
  while (r) {
    PostedRecv* next = r->next;
    r->prev = r->next = nullptr;
    complete_recv(r, failed_, -1);
    r = next;
  }
  for (auto& p : peers_) {
    if (p.body_recv) {
      PostedRecv* body = p.body_recv;
      p.body_recv = nullptr;
      complete_recv(body, failed_, -1);
    }
    auto sends = p.sends.take_all();
    for (auto& s : sends) complete_send(s, failed_);
  }
  pending_ = 0;
}

void Engine::finish_half_sent(int q, Deadline deadline) {
  Peer& p = peers_[q];
  OutgoingSend& s = p.sends.front();
  const size_t header_bytes = sizeof(FrameHeader);
  if (s.sent < header_bytes) {
    const auto* header = reinterpret_cast<const uint8_t*>(&s.header);
    if (!p.link->write_whole(header + s.sent, header_bytes - s.sent, deadline).ok()) return;
    s.sent = header_bytes;
  }
  const size_t off = s.sent - header_bytes;
  if (!p.link->write_whole(s.data + off, s.bytes - off, deadline).ok()) return;
  // Sent whole (it completes with the failure, like the rest).
  s.sent = header_bytes + s.bytes;
}

Deadline Engine::earliest_deadline() const {
  Deadline d = Deadline::never();
  for (const PostedRecv* r = recvs_head_; r; r = r->next) d = Deadline::sooner(d, r->deadline);
  for (const auto& p : peers_) {
    if (p.body_recv) d = Deadline::sooner(d, p.body_recv->deadline);
    for (const auto& s : p.sends) d = Deadline::sooner(d, s.deadline);
  }
  return d;
}

std::string Engine::owed_peers() const {
  std::vector<int> from, to;
  for (const PostedRecv* r = recvs_head_; r; r = r->next) from.push_back(r->request.peer);
  for (int q = 0; q < size_; ++q) {
    if (!peers_[q].sends.empty()) to.push_back(q);
    if (peers_[q].body_recv) from.push_back(q);
  }
  auto list = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      s += (i ? ", " : "") + (v[i] == kAnySource ? std::string("any") : std::to_string(v[i]));
    }
    return s + "]";
  };
  std::string out;
  if (!from.empty()) out += "still waiting to receive from ranks " + list(from);
  if (!to.empty()) out += std::string(out.empty() ? "" : "; ") + "still sending to ranks " + list(to);
  // A peer whose host stopped answering is the cause; name its host.
  std::vector<int> owed = from;
  owed.insert(owed.end(), to.begin(), to.end());
  std::sort(owed.begin(), owed.end());
  owed.erase(std::unique(owed.begin(), owed.end()), owed.end());
  for (int q : owed) {
    if (q < 0 || q >= size_ || !peers_[q].link) continue;
    const std::string silence = peers_[q].link->unreachable_since();
    if (silence.empty()) continue;
    const std::string& address = peers_[q].link->address();
    const std::string host = address.substr(0, address.rfind(':'));
    out += "; rank " + std::to_string(q) + " on host " + host + " is unreachable (" + silence +
           "): the network link to that host, or the host, is down";
  }
  return out;
}

// expire fails the transport when a request passed its deadline: its
// stream position is then unknown, so the group cannot go on.
void Engine::expire(Clock::time_point now) {
  // The message names the request that expired first.
  const std::string* what = nullptr;
  Clock::time_point first = Clock::time_point::max();
  auto consider = [&](const Deadline& deadline, const std::string* name) {
    if (deadline.is_never() || deadline.when() > now || deadline.when() >= first) return;
    first = deadline.when();
    what = name;
  };
  for (const PostedRecv* r = recvs_head_; r; r = r->next) {
    if (r->deadline.is_never() || r->deadline.when() > now) continue;
    consider(r->deadline, r->what);
    // A peer's message with another tag explains the wait better than "timed out".
    Status mismatch = unmatched_tag(*r);
    if (!mismatch.ok()) return fail(mismatch);
  }
  for (const auto& p : peers_) {
    if (p.body_recv) consider(p.body_recv->deadline, p.body_recv->what);
    for (const auto& s : p.sends) consider(s.deadline, s.what);
  }
  // "Timed out" capitalised and spaced as torch's own backends write it:
  // torch's tests and frameworks match " (Timed out|closed|timeout) ".
  if (what) fail(timeout_error(*what + ": Timed out (" + owed_peers() + ")"));
}

}  // namespace cohort
