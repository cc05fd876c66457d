// engine.cc: posting requests, exchange() and completing requests.
#include "transport/engine.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "common/config_registry.h"

namespace cohort {

Engine::Engine(int rank, int size, std::vector<std::unique_ptr<Link>> links,
               std::unique_ptr<Acceptor> acceptor, EngineOptions options)
    : rank_(rank),
      size_(size),
      peers_(static_cast<size_t>(size)),
      acceptor_(std::move(acceptor)),
      host_of_(std::move(options.host_of)),
      ranks_per_cpu_(options.ranks_per_cpu),
      spin_bare_(options.spin_bare),
      link_bytes_per_second_(options.link_bytes_per_second),
      lost_(new std::atomic<bool>[static_cast<size_t>(size)]()),
      links_(*this, options.doorbell_fd) {
  for (int q = 0; q < size; ++q) peers_[q].link = std::move(links[static_cast<size_t>(q)]);
  links_.count_links();
  spin_us_ = static_cast<size_t>(std::max<int64_t>(0, config_int(knobs::kTcpSpinUs)));
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Engine::~Engine() {
  // A group going away is not a failure its peers must hear about: only
  // complete what is still pending here; the links then close normally.
  if (pending_ > 0) {
    fail(Status(StatusCode::kNetworkError, "the group was destroyed with this operation pending"), false);
  }
  acceptor_.reset();  // it points at the links
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::string Engine::peer_name(int peer) const {
  if (peer < 0 || peer >= size_ || !peers_[peer].link) return "rank " + std::to_string(peer);
  return "rank " + std::to_string(peer) + " (" + peers_[peer].link->address() + ")";
}

std::vector<int> Engine::lost_peers() const {
  std::vector<int> out;
  for (int q = 0; q < size_; ++q) {
    if (lost_[q].load()) out.push_back(q);
  }
  return out;
}

void Engine::pace_by_share(const std::vector<size_t>& bytes_to) {
  if (link_bytes_per_second_ == 0) return;
  auto remote = [&](int q) { return q != rank_ && host_of(q) != host_of(rank_) && peers_[q].link; };
  double local = 0, remote_bytes = 0;
  for (int q = 0; q < size_; ++q) {
    local += host_of(q) == host_of(rank_) ? 1 : 0;
    if (remote(q) && !bytes_to.empty()) remote_bytes += static_cast<double>(bytes_to[static_cast<size_t>(q)]);
  }
  // This rank's part of the link is 1/local of it (the host's other ranks
  // send as much at the same time), split by bytes among its streams; a
  // stream that carries nothing is left unpaced.
  const double mine = static_cast<double>(link_bytes_per_second_) / local;
  for (int q = 0; q < size_; ++q) {
    if (!remote(q)) continue;
    const double bytes = bytes_to.empty() ? 0 : static_cast<double>(bytes_to[static_cast<size_t>(q)]);
    const uint64_t share =
        bytes > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(mine * bytes / remote_bytes)) : 0;
    peers_[q].link->pace(share);
  }
}

void Engine::wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

void Engine::interrupt(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(interrupt_mu_);
    if (interrupted_) return;
    interrupt_reason_ = reason;
    interrupted_ = true;
  }
  wake();
}

// With an acceptor there is always something to serve: peers may connect
// while this rank's worker has nothing else to do.
bool Engine::has_pending() const {
  return pending_ > 0 || acceptor_ != nullptr;
}

void Engine::check_interrupt() {
  if (!interrupted_.load() || !failed_.ok()) return;
  Status reason;
  {
    std::lock_guard<std::mutex> lock(interrupt_mu_);
    reason = interrupt_reason_;
  }
  fail(reason);  // outside the lock: a completion may call interrupt() again
}

Engine::PostedRecv* Engine::take_recv() {
  if (free_recvs_.empty()) {
    recv_pool_.push_back(std::make_unique<PostedRecv>());
    free_recvs_.reserve(recv_pool_.capacity());
    return recv_pool_.back().get();
  }
  PostedRecv* r = free_recvs_.back();
  free_recvs_.pop_back();
  return r;
}

void Engine::release_recv(PostedRecv* r) {
  r->done = nullptr;
  r->batch = nullptr;
  r->out = nullptr;
  r->prev = r->next = nullptr;
  free_recvs_.push_back(r);
}

void Engine::link_recv(PostedRecv* r) {
  r->next = nullptr;
  r->prev = recvs_tail_;
  if (recvs_tail_) {
    recvs_tail_->next = r;
  } else {
    recvs_head_ = r;
  }
  recvs_tail_ = r;
}

void Engine::unlink_recv(PostedRecv* r) {
  (r->prev ? r->prev->next : recvs_head_) = r->next;
  (r->next ? r->next->prev : recvs_tail_) = r->prev;
  r->prev = r->next = nullptr;
}

void Engine::complete_recv(PostedRecv* r, const Status& status, int source) {
  if (r->batch) {
    RecvRequest* out = r->out;
    out->source = source;
    // A pipelined algorithm may take the segment and post the request
    // again, rewritten, in the same exchange.
    if (status.ok() && out->on_arrival && out->on_arrival(out->context, *out)) {
      r->request = *out;
      return start_recv(r);
    }
    Batch* batch = r->batch;
    release_recv(r);
    --batch->remaining;
    if (!status.ok() && batch->first_error.ok()) batch->first_error = status;
    return;
  }
  Completion done = std::move(r->done);
  release_recv(r);
  done(status, source);
}

void Engine::complete_send(OutgoingSend& s, const Status& status) {
  if (s.batch) {
    --s.batch->remaining;
    if (!status.ok() && s.batch->first_error.ok()) s.batch->first_error = status;
    return;
  }
  Completion done = std::move(s.done);
  done(status, -1);
}

void Engine::start_recv(PostedRecv* r) {
  const int from = r->request.peer;
  if (from != kAnySource && (from < 0 || from >= size_ || !peers_[from].link)) {
    return complete_recv(
        r,
        invalid_argument("cannot receive from rank " + std::to_string(from) + " in " + *r->what +
                         ": the peers are the other ranks of 0.." + std::to_string(size_ - 1)),
        -1);
  }
  if (!failed_.ok()) return complete_recv(r, failed_, -1);
  bool matched = false;
  Status st = take_unexpected(r, &matched);
  if (!st.ok()) {
    complete_recv(r, st, -1);
    return fail(st);
  }
  if (matched) return complete_recv(r, Status::ok_status(), r->request.source);
  ++pending_;
  // The message may be arriving right now, into an unexpected buffer (its
  // header came before this receive was posted).
  if (adopt_arriving(r, &st)) return;
  if (!st.ok()) {
    link_recv(r);
    return fail(st);
  }
  if (from != kAnySource && !peers_[from].closed.ok()) {
    Status why = unmatched_tag(*r);
    if (why.ok()) why = peers_[from].closed;
    link_recv(r);
    return fail(why);
  }
  link_recv(r);
}

void Engine::post_recv(const RecvRequest& recv, Deadline deadline, const std::string* what, Completion done) {
  check_interrupt();
  if (!failed_.ok()) return done(failed_, -1);
  PostedRecv* r = take_recv();
  r->request = recv;
  r->deadline = deadline;
  r->what = what;
  r->done = std::move(done);
  start_recv(r);
}

void Engine::start_send(int peer, OutgoingSend send) {
  if (peer < 0 || peer >= size_ || !peers_[peer].link) {
    return complete_send(
        send, invalid_argument("cannot send to rank " + std::to_string(peer) + " in " + *send.what +
                               ": the peers are the other ranks of 0.." + std::to_string(size_ - 1)));
  }
  Peer& p = peers_[peer];
  if (!failed_.ok()) return complete_send(send, failed_);
  if (!p.closed.ok()) {
    Status why = p.closed;
    complete_send(send, why);
    return fail(why);
  }
  const Deadline deadline = send.deadline;
  p.sends.push_back(std::move(send));
  ++pending_;
  if (!p.link->ready()) {
    Status st = p.link->open(deadline);
    if (!st.ok()) return fail(st);
  }
  // Try at once: most sends fit in the socket buffer or ring and finish here.
  if (p.link->ready() && p.sends.size() == 1) {
    Status st = write_to(peer);
    if (!st.ok()) fail(st);
  }
}

void Engine::post_send(const SendRequest& send, Deadline deadline, const std::string* what, Completion done) {
  check_interrupt();
  if (!failed_.ok()) return done(failed_, -1);
  OutgoingSend out;
  out.header = FrameHeader{kFrameMagic, static_cast<uint32_t>(send.kind), send.tag, send.bytes};
  out.data = static_cast<const uint8_t*>(send.data);
  out.bytes = send.bytes;
  out.deadline = deadline;
  out.what = what;
  out.done = std::move(done);
  start_send(send.peer, std::move(out));
}

}  // namespace cohort
