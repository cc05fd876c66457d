// matching.cc: which posted receive a message belongs to, the messages
// that came before their receive, and the desyncs that matching finds (a
// message of another collective, or of another size, than expected).
#include <cstring>
#include <string>

#include "common/relayed_cause.h"
#include "transport/engine.h"

namespace cohort {
namespace {

Status desync(std::string m) {
  return Status(StatusCode::kDesync, std::move(m));
}

std::string describe_tag(uint32_t kind, uint64_t tag) {
  if (kind == static_cast<uint32_t>(MessageKind::kCollective)) {
    return "collective #" + std::to_string(tag >> 24) + " step " + std::to_string(tag & 0xFFFFFF);
  }
  if (kind == static_cast<uint32_t>(MessageKind::kFingerprint)) {
    return "the fingerprint of collective #" + std::to_string(tag);
  }
  return "point-to-point tag " + std::to_string(static_cast<int64_t>(tag));
}

// sizes_differ is the desync of a message whose size is not the one its
// receive expects, in the same words wherever the engine finds it.
Status sizes_differ(const std::string& peer, size_t sent, size_t expected, const std::string& what,
                    uint32_t kind, uint64_t tag) {
  return desync(peer + " sent " + std::to_string(sent) + " bytes but this rank expected " +
                std::to_string(expected) + " in " + what + " (" + describe_tag(kind, tag) +
                "): sizes differ between ranks");
}

// other_collective is the desync of a message of collective #m from a
// peer while this rank waits for #n from it: messages between two ranks
// keep their order, so the ranks run different collectives.
Status other_collective(const std::string& peer, uint32_t kind, uint64_t sent_tag, uint64_t expected_tag,
                        const std::string& what) {
  return desync(peer + " sent " + describe_tag(kind, sent_tag) + " while this rank expected " +
                describe_tag(kind, expected_tag) + " in " + what +
                ": the ranks called different collectives (or in another order)");
}

bool from_peer(const RecvRequest& r, int q) {
  return r.peer == q || r.peer == kAnySource;
}

}  // namespace

Status Engine::take_unexpected(PostedRecv* pr, bool* matched) {
  *matched = false;
  RecvRequest& r = pr->request;
  for (int q = 0; q < size_; ++q) {
    if (!from_peer(r, q)) continue;
    auto& queue = peers_[q].unexpected;
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->kind != r.kind) continue;
      if (it->tag != r.tag) {
        if (r.kind == MessageKind::kCollective && (it->tag >> 24) != (r.tag >> 24)) {
          return other_collective(peer_name(q), static_cast<uint32_t>(r.kind), it->tag, r.tag, *pr->what);
        }
        continue;
      }
      if (it->size != r.bytes) {
        return sizes_differ(peer_name(q), it->size, r.bytes, *pr->what, static_cast<uint32_t>(r.kind), r.tag);
      }
      if (r.bytes) std::memcpy(r.data, it->data.get(), r.bytes);
      give_back(std::move(it->data), it->capacity);
      queue.erase(it);
      *matched = true;
      r.source = q;
      return Status::ok_status();
    }
  }
  return Status::ok_status();
}

bool Engine::adopt_arriving(PostedRecv* pr, Status* error) {
  const RecvRequest& r = pr->request;
  for (int q = 0; q < size_; ++q) {
    Peer& p = peers_[q];
    if (!p.in_body || !p.body_is_unexpected || !from_peer(r, q)) continue;
    if (p.body_unexpected.kind != r.kind || p.body_unexpected.tag != r.tag) continue;
    if (p.header.bytes != r.bytes) {
      *error = sizes_differ(peer_name(q), p.header.bytes, r.bytes, *pr->what, static_cast<uint32_t>(r.kind),
                            r.tag);
      return false;
    }
    // Move what came so far into the receive buffer and let the rest land
    // there directly.
    if (p.body_got) std::memcpy(r.data, p.body_unexpected.data.get(), p.body_got);
    p.body = static_cast<uint8_t*>(r.data);
    give_back(std::move(p.body_unexpected.data), p.body_unexpected.capacity);
    p.body_is_unexpected = false;
    p.body_recv = pr;
    return true;
  }
  return false;
}

Status Engine::start_body(int q) {
  Peer& p = peers_[q];
  const FrameHeader& h = p.header;
  if (h.magic != kFrameMagic) {
    return desync("received a corrupt frame from " + peer_name(q) + " (bad magic)");
  }
  PostedRecv* match = nullptr;
  for (PostedRecv* r = recvs_head_; r; r = r->next) {
    if (static_cast<uint32_t>(r->request.kind) == h.kind && from_peer(r->request, q) &&
        r->request.tag == h.tag) {
      match = r;
      break;
    }
  }
  if (!match && h.kind == static_cast<uint32_t>(MessageKind::kCollective)) {
    for (PostedRecv* pr = recvs_head_; pr; pr = pr->next) {
      const RecvRequest& r = pr->request;
      // A message of another collective (its sequence number is in the
      // tag's high bits) from a rank we await means the ranks run different
      // collectives. Another step of the same one is only early: it waits
      // aside.
      if (r.kind == MessageKind::kCollective && r.peer == q && (r.tag >> 24) != (h.tag >> 24)) {
        return other_collective(peer_name(q), h.kind, h.tag, r.tag, *pr->what);
      }
    }
  }
  if (match && match->request.bytes != h.bytes) {
    return sizes_differ(peer_name(q), h.bytes, match->request.bytes, *match->what, h.kind, h.tag);
  }
  p.in_body = true;
  p.body_got = 0;
  if (match) {
    unlink_recv(match);
    p.body_recv = match;
    p.body = static_cast<uint8_t*>(match->request.data);
  } else {
    p.body_is_unexpected = true;
    p.body_unexpected.kind = static_cast<MessageKind>(h.kind);
    p.body_unexpected.tag = h.tag;
    p.body_unexpected.size = h.bytes;
    p.body_unexpected.data = take_buffer(h.bytes, &p.body_unexpected.capacity);
    p.body = p.body_unexpected.data.get();
  }
  if (h.bytes == 0) finish_body(q);
  return Status::ok_status();
}

void Engine::finish_body(int q) {
  Peer& p = peers_[q];
  p.in_body = false;
  p.header_got = 0;
  if (p.body_recv) {
    PostedRecv* r = p.body_recv;
    p.body_recv = nullptr;
    --pending_;
    complete_recv(r, Status::ok_status(), q);
    return;
  }
  p.body_is_unexpected = false;
  if (p.body_unexpected.kind == MessageKind::kFailure) {
    // A peer failed and says why: fail the same way, naming the cause and
    // what this rank itself was waiting for, which helps find the rank at
    // the end of the chain (rank 0 waits for 2, which waits for the silent 1).
    RelayedCause cause;
    const bool readable = decode_cause(p.body_unexpected.data.get(), p.body_unexpected.size, &cause);
    give_back(std::move(p.body_unexpected.data), p.body_unexpected.capacity);
    p.closed = readable ? relayed_failure(std::move(cause), rank_, owed_peers())
                        : network_error(peer_name(q) + " failed and sent a report of why that could not be read");
    fail(p.closed);
    return;
  }
  p.unexpected.push_back(std::move(p.body_unexpected));
  p.body_unexpected = Unexpected();
}

Status Engine::unmatched_tag(const PostedRecv& recv) const {
  const RecvRequest& r = recv.request;
  if (r.kind != MessageKind::kPointToPoint) return Status::ok_status();
  for (int q = 0; q < size_; ++q) {
    if (!from_peer(r, q)) continue;
    for (const Unexpected& u : peers_[static_cast<size_t>(q)].unexpected) {
      if (u.kind != MessageKind::kPointToPoint || u.tag == r.tag) continue;
      // Tags travel as the int the user gave, sign-extended.
      return desync(*recv.what + ": " + peer_name(q) + " sent a message with tag " +
                    std::to_string(static_cast<int64_t>(u.tag)) + " (" + std::to_string(u.size) +
                    " bytes) that no receive matched; this rank waited for tag " +
                    std::to_string(static_cast<int64_t>(r.tag)) + " (" + std::to_string(r.bytes) + " bytes)");
    }
  }
  return Status::ok_status();
}

std::unique_ptr<uint8_t[]> Engine::take_buffer(size_t n, size_t* capacity) {
  size_t best = spare_.size();
  for (size_t i = 0; i < spare_.size(); ++i) {
    if (spare_[i].first >= n && (best == spare_.size() || spare_[i].first < spare_[best].first)) best = i;
  }
  if (best < spare_.size()) {
    *capacity = spare_[best].first;
    auto buffer = std::move(spare_[best].second);
    spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(best));
    return buffer;
  }
  *capacity = std::max<size_t>(n, 1);
  return std::unique_ptr<uint8_t[]>(new uint8_t[*capacity]);  // not zero-filled
}

void Engine::give_back(std::unique_ptr<uint8_t[]> buffer, size_t capacity) {
  constexpr size_t kMaxSpare = 32;
  if (buffer && spare_.size() < kMaxSpare) {
    if (spare_.capacity() < kMaxSpare) spare_.reserve(kMaxSpare);
    spare_.emplace_back(capacity, std::move(buffer));
  }
}

}  // namespace cohort
