// streams.cc: frames in and out of the links. Each peer's bytes form one
// stream: a header, its payload, the next header... read_from turns what
// a link has into frames, write_to puts the queued sends on it.
#include <cerrno>
#include <cstring>

#include "transport/engine.h"

namespace cohort {

Status Engine::read_from(int q) {
  Peer& p = peers_[q];
  Link& link = *p.link;
  const bool user_space = link.moves_in_user_space();
  bool consumed = false;
  for (;;) {
    // After a failure nothing more is read: what a link says now (its end,
    // as this rank shut it down) says nothing of the peer.
    if (!failed_.ok()) return Status::ok_status();
    void* dst;
    size_t want;
    if (!p.in_body) {
      dst = reinterpret_cast<uint8_t*>(&p.header) + p.header_got;
      want = sizeof(FrameHeader) - p.header_got;
    } else {
      dst = p.body + p.body_got;
      want = p.header.bytes - p.body_got;
    }
    const LinkIo io = link.read(dst, want);
    if (io.outcome == LinkIo::Outcome::kBlocked) {
      // The peer may be waiting for room to write more.
      if (consumed) link.moved();
      return Status::ok_status();
    }
    if (io.outcome == LinkIo::Outcome::kFailed) {
      return lost(q, network_error(peer_name(q) + " is gone: receiving failed with " +
                                   std::strerror(io.error) + " (the peer process probably died)"));
    }
    if (io.outcome == LinkIo::Outcome::kEnded) {
      if (p.in_body || p.header_got > 0) {
        p.closed = lost(
            q, network_error(peer_name(q) + " closed its connection in the middle of a message (the peer "
                                            "process exited or was killed)"));
        return p.closed;
      }
      peer_closed(q,
                  lost(q, network_error(peer_name(q) +
                                        " closed its connection (the peer process exited or was killed)")));
      return Status::ok_status();
    }
    if (user_space) {
      consumed = true;
      ++user_space_moves_;
    }
    // The link had no more: the read after this one would only say so
    // (over TCP a recvmsg(2) that finds nothing, one a message). poll(2),
    // on this turn or the next, reports what comes later.
    const bool drained = io.drained;
    if (!p.in_body) {
      p.header_got += io.bytes;
      if (p.header_got < sizeof(FrameHeader)) continue;
      Status st = start_body(q);
      if (!st.ok()) return st;
    } else {
      p.body_got += io.bytes;
      if (p.body_got == p.header.bytes) {
        finish_body(q);
        // Between messages, keep this rank's own sends moving: a long run of
        // receives (each maybe reduced on arrival) would otherwise starve the
        // peer, who waits for what this rank has to send.
        if (has_queued_sends()) {
          Status st = write_queued();
          if (!st.ok()) return st;
        }
      }
    }
    if (drained) {
      if (consumed) link.moved();
      return Status::ok_status();
    }
  }
}

void Engine::peer_closed(int q, Status why) {
  Peer& p = peers_[q];
  p.closed = why;
  bool needed = !p.sends.empty();
  for (PostedRecv* r = recvs_head_; r; r = r->next) {
    if (r->request.peer != q) continue;
    needed = true;
    // It left without sending what this rank waits for, but with another tag.
    Status mismatch = unmatched_tag(*r);
    if (!mismatch.ok()) return fail(mismatch);
  }
  if (needed) fail(why);
}

bool Engine::has_queued_sends() const {
  for (const auto& p : peers_) {
    if (!p.sends.empty() && p.link->ready()) return true;
  }
  return false;
}

Status Engine::write_queued() {
  for (int q = 0; q < size_; ++q) {
    Peer& p = peers_[q];
    if (!p.link || !p.link->ready() || p.sends.empty() || !p.closed.ok()) continue;
    Status st = write_to(q);
    if (!st.ok()) return st;
  }
  return Status::ok_status();
}

Status Engine::write_to(int q) {
  Peer& p = peers_[q];
  Link& link = *p.link;
  bool wrote = false;
  while (!p.sends.empty()) {
    OutgoingSend& s = p.sends.front();
    iovec iov[2];
    size_t n_iov = 0;
    const size_t header_bytes = sizeof(FrameHeader);
    if (s.sent < header_bytes) {
      iov[n_iov++] = {reinterpret_cast<uint8_t*>(&s.header) + s.sent, header_bytes - s.sent};
      if (s.bytes) iov[n_iov++] = {const_cast<uint8_t*>(s.data), s.bytes};
    } else {
      size_t off = s.sent - header_bytes;
      iov[n_iov++] = {const_cast<uint8_t*>(s.data) + off, s.bytes - off};
    }
    const LinkIo io = link.write(iov, n_iov);
    if (io.outcome == LinkIo::Outcome::kBlocked) break;  // full: the peer has yet to read
    if (io.outcome != LinkIo::Outcome::kMoved) {
      // The peer may have failed for a reason of its own (another rank
      // died) and said so just before it dropped its link: read what it
      // sent first, so that its report, not this broken pipe, names the
      // cause (and the peer is not taken for dead).
      if (failed_.ok() && !reading_after_send_error_) {
        reading_after_send_error_ = true;
        Status ignored = read_from(q);
        (void)ignored;
        reading_after_send_error_ = false;
        if (!failed_.ok()) return failed_;
      }
      return lost(q, network_error(peer_name(q) + " is gone: sending failed with " + std::strerror(io.error) +
                                   " (the peer process probably died)"));
    }
    wrote = true;
    s.sent += io.bytes;
    if (s.sent == header_bytes + s.bytes) {
      OutgoingSend done = std::move(s);
      p.sends.pop_front();
      --pending_;
      complete_send(done, Status::ok_status());
    }
  }
  if (wrote && link.moves_in_user_space()) {
    ++user_space_moves_;
    link.moved();
  }
  return Status::ok_status();
}

}  // namespace cohort
