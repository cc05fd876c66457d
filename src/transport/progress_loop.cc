// progress_loop.cc: the loop that waits on every link at once, and the two
// ways into it (exchange, progress).
//
// Links that move bytes in user space (shared memory) are moved on every
// turn, without a system call; the others are watched with poll(2). A
// quiet loop spins a while before it sleeps (COHORT_TCP_SPIN_US), because
// a sleeping thread takes longer to wake than a small message's trip.
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/socket.h"
#include "common/spin.h"
#include "transport/engine.h"

namespace cohort {

void Engine::move_user_space_links() {
  for (int q = 0; q < size_ && failed_.ok(); ++q) {
    Peer& p = peers_[q];
    if (!p.link || !p.link->moves_in_user_space() || !p.closed.ok()) continue;
    Status st = p.sends.empty() ? Status::ok_status() : write_to(q);
    if (st.ok()) st = read_from(q);
    if (!st.ok()) fail(st);
  }
}

void Engine::serve_link(int q, short revents) {
  Peer& p = peers_[q];
  if (!p.closed.ok()) return;
  const bool was_ready = p.link->ready();
  bool became_ready = false;
  Status st = p.link->on_ready(revents, &became_ready);
  if (!st.ok()) {
    // A link that carried messages and broke lost its peer; one that was
    // still connecting was refused or could not connect.
    return fail(was_ready && st.code() == StatusCode::kNetworkError ? lost(q, st) : st);
  }
  if (became_ready) {
    st = write_to(q);  // what was queued for it
  } else if (was_ready) {
    if ((revents & POLLOUT) && !p.sends.empty()) st = write_to(q);
    if (st.ok() && (revents & (POLLIN | POLLERR | POLLHUP))) st = read_from(q);
  }
  if (!st.ok()) fail(st);
}

// drive's steps. They run on every turn of its loop, so they are forced
// inline into it: as separate calls (which is what GCC chose for a plain
// `inline`) they would put a call per turn on a small message's path.

[[gnu::always_inline]] inline void Engine::fill_poll_table() {
  links_.fill(table_);
  if (acceptor_) acceptor_->watch(table_.fds);
  table_.fds.push_back(pollfd{wake_fd_, POLLIN, 0});
}

[[gnu::always_inline]] inline void Engine::drain_wake_fd() {
  uint64_t count;
  ssize_t ignored = ::read(wake_fd_, &count, sizeof count);
  (void)ignored;
}

[[gnu::always_inline]] inline void Engine::serve_ready_fds(size_t accepting) {
  // A rung doorbell needs nothing more: the turn's move_user_space_links
  // reads what it rang for.
  (void)links_.serve(table_);
  if (accepting && failed_.ok()) {
    became_ready_.clear();
    Status st = acceptor_->on_ready(&table_.fds[table_.links_end], accepting, &became_ready_);
    if (!st.ok()) fail(st);
    // A link the acceptor just connected may have sends queued for it.
    for (size_t i = 0; i < became_ready_.size() && failed_.ok(); ++i) {
      st = write_to(became_ready_[i]);
      if (!st.ok()) fail(st);
    }
  }
}

template <class Finished>
bool Engine::drive(Finished finished, Deadline until, bool stop_on_wake) {
  SpinPermit permit;
  // Spin while data keeps moving: every event starts the quiet spell over,
  // so a large transfer never pays a wake-up per socket buffer; only a
  // quiet spell of spin_us_ puts the thread to sleep.
  QuietSpell spell(std::chrono::microseconds(permit.granted() ? spin_us_ : 0), spin_bare_);
  // One clock read per turn of the loop, taken at its end and used at the
  // start of the next: a small message's whole trip is a few such turns,
  // and each read costs ~25 ns here.
  Clock::time_point now = Clock::now();
  spell.restart(now);
  uint32_t iteration = 0, turn = 0;
  for (;;) {
    if (finished() || !failed_.ok()) return true;
    if (links_.any_user_space()) {
      const uint64_t before = user_space_moves_;
      move_user_space_links();
      if (user_space_moves_ != before) spell.restart(now);
      if (finished() || !failed_.ok()) return true;
    }
    fill_poll_table();
    const size_t n = table_.fds.size();  // the last entry is wake_fd_
    const QuietSpell::Phase phase = spell.phase(now);
    const int timeout = phase != QuietSpell::Phase::kSleep
                            ? 0
                            : Deadline::sooner(until, earliest_deadline()).poll_timeout_ms();
    const auto seen = links_.look(table_, timeout, iteration, [](pollfd* fds, nfds_t count, int ms) {
      return ::poll(fds, count, ms);
    });
    const int rc = seen.rc;
    // After a sleep the turn's clock reading is stale by the sleep: what
    // woke it must push the end of the spin out from now, not from then.
    if (seen.slept) now = Clock::now();
    if (rc < 0 && seen.error != EINTR) {
      fail(network_error(std::string("poll failed: ") + std::strerror(seen.error)));
      continue;
    }
    // Nothing yet while spinning: past the spell's bare part, let other
    // runnable threads (other ranks on an oversubscribed host) have the
    // core before polling again.
    if (rc == 0 && !seen.slept && phase != QuietSpell::Phase::kBareSpin) sched_yield();
    const bool woken = rc > 0 && table_.fds[n - 1].revents;
    if (woken) {
      drain_wake_fd();
      if (interrupted_.load()) {
        check_interrupt();
        continue;
      }
      if (stop_on_wake) {
        // Woken for new work, maybe before this call's first look at the
        // deadlines: look now, so that a stream of wake-ups cannot keep a
        // request past its deadline.
        now = Clock::now();
        if (earliest_deadline().when() <= now) expire(now);
        return false;
      }
    }
    if (rc > (woken ? 1 : 0)) {
      spell.restart(now);
      serve_ready_fds(n - 1 - table_.links_end);
    }
    now = Clock::now();
    // Deadlines are looked at in the first turn of every call (a one-turn
    // progress() from a waiting collective included), after every sleep,
    // and every 64th turn of a spin: each look walks every pending request.
    if ((timeout != 0 || (turn++ & 63) == 0) && earliest_deadline().when() <= now) expire(now);
    if (finished()) return true;
    if (!until.is_never() && until.when() <= now) return false;
  }
}

Status Engine::poll_health() {
  check_interrupt();
  if (!failed_.ok()) return failed_;
  // The links' descriptors alone, for reading: a look, not a turn.
  std::vector<pollfd>& fds = table_.fds;
  std::vector<int>& owner = table_.owner;
  fds.clear();
  owner.clear();
  for (int q = 0; q < size_; ++q) {
    const Peer& p = peers_[q];
    if (!p.link || !p.closed.ok() || !p.link->ready()) continue;
    const LinkPoll watch = p.link->poll(false);
    if (watch.fd < 0) continue;
    fds.push_back(pollfd{watch.fd, POLLIN, 0});
    owner.push_back(q);
  }
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
    for (size_t i = 0; i < fds.size() && failed_.ok(); ++i) {
      if (fds[i].revents) serve_link(owner[i], fds[i].revents & ~POLLOUT);
    }
  }
  for (int q = 0; q < size_ && failed_.ok(); ++q) {
    const Peer& p = peers_[q];
    if (!p.link || !p.link->moves_in_user_space() || !p.closed.ok()) continue;
    Status st = read_from(q);
    if (!st.ok()) fail(st);
  }
  // A peer that merely closed is not reported: it may have left after
  // doing its part of what the caller waits for. One that failed said so
  // first (failed_ is then set), and one that died is the caller's to see.
  return failed_;
}

Status Engine::exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs,
                        Deadline deadline, const std::string& what) {
  check_interrupt();
  if (!failed_.ok()) return failed_;
  Batch batch;
  batch.remaining = num_sends + num_recvs;
  for (size_t i = 0; i < num_recvs; ++i) {
    PostedRecv* r = take_recv();
    r->request = recvs[i];
    r->deadline = deadline;
    r->what = &what;
    r->batch = &batch;
    r->out = &recvs[i];
    start_recv(r);
  }
  for (size_t i = 0; i < num_sends; ++i) {
    const SendRequest& s = sends[i];
    OutgoingSend out;
    out.header = FrameHeader{kFrameMagic, static_cast<uint32_t>(s.kind), s.tag, s.bytes};
    out.data = static_cast<const uint8_t*>(s.data);
    out.bytes = s.bytes;
    out.deadline = deadline;
    out.what = &what;
    out.batch = &batch;
    start_send(s.peer, std::move(out));
  }
  drive([&] { return batch.remaining == 0; }, Deadline::never(), false);
  return batch.first_error;
}

void Engine::progress(Deadline until) {
  check_interrupt();
  drive([&] { return pending_ == 0 && !acceptor_; }, until, true);
}

}  // namespace cohort
