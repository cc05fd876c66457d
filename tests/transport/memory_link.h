// memory_link.h: a Link (src/transport/link.h) over byte queues inside this
// process, so that the engine (src/transport/engine.h) can be tested without
// sockets or shared memory: ranks as threads, or all on one thread, with a
// real medium's faults made on demand.
//
// A MemoryPipe joins two ranks with one queue each way. Its capacity makes a
// large message cross in many pieces, and `chunk` caps what one read or
// write moves, so that headers arrive in pieces too. Faults: close() ends
// one rank's side (the other reads what was sent, then the end, as after a
// process exit); break_pipe() makes every call on both sides fail with an
// errno; cut_after() lets only so many more bytes of one side through and
// then ends that direction: the reader sees its peer vanish in the middle of
// a message while the writer believes that everything went out.
//
// Its links move bytes in user space, as shared memory does, so the engine
// moves them on every turn of its loop. Each side has an eventfd for a
// doorbell, which the other side rings from moved() while this side has
// said it sleeps (about_to_sleep .. awake), as ShmLink does with its socket;
// an end (close, shut_down) or a break rings always, as a socket's end wakes
// poll(2).
//
// Thread-safe: two engines may drive the two sides from two threads while a
// test closes or breaks the pipe from a third. One mutex guards it all, so
// a side that says it sleeps and a writer that looks whether to ring cannot
// miss each other.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "transport/engine.h"
#include "transport/link.h"

namespace cohort::testing {

// MemoryPipeOptions shape both queues of a pipe.
struct MemoryPipeOptions {
  size_t capacity = size_t{1} << 20;  // bytes a queue holds before writes block (at least 1)
  size_t chunk = SIZE_MAX;            // the most bytes one read or write moves (at least 1)
};

// MemoryPipe joins two ranks. Make it with std::make_shared: its links
// share it.
class MemoryPipe : public std::enable_shared_from_this<MemoryPipe> {
 public:
  MemoryPipe(int rank_a, int rank_b, MemoryPipeOptions options = {}) : options_(options) {
    sides_[0].rank = rank_a;
    sides_[1].rank = rank_b;
    for (Side& s : sides_) {
      s.out.data.resize(std::max<size_t>(1, options_.capacity));
      s.doorbell = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (s.doorbell < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    }
  }
  ~MemoryPipe() {
    for (Side& s : sides_) ::close(s.doorbell);
  }
  MemoryPipe(const MemoryPipe&) = delete;
  MemoryPipe& operator=(const MemoryPipe&) = delete;

  // end_of returns `rank`'s side of the pipe as its Link to the other rank;
  // once per rank. Destroying the link ends that side (shut_down).
  std::unique_ptr<Link> end_of(int rank);

  // close ends `rank`'s side, as that rank's process exiting would: the
  // other side reads what is still queued, then kEnded; its writes fail
  // with EPIPE.
  void close(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    sides_[side_of(rank)].closed = true;
    ring(0);
    ring(1);
  }

  // break_pipe makes every later read and write on both sides fail with
  // `error` (kFailed), as a connection reset would.
  void break_pipe(int error) {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = error;
    ring(0);
    ring(1);
  }

  // cut_after lets `bytes` more bytes written by `from_rank` through; the
  // bytes it writes after those are lost on the way (its writes still say
  // they moved), and the other side reads kEnded once it has read the
  // ones before the cut.
  void cut_after(int from_rank, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    const int s = side_of(from_rank);
    sides_[s].cut = true;
    sides_[s].cut_left = bytes;
    if (bytes == 0) ring(1 - s);
  }

  // writes_from counts the writes of `rank` that put bytes in the queue:
  // how many pieces its messages crossed in.
  size_t writes_from(int rank) const {
    std::lock_guard<std::mutex> lock(mu_);
    return sides_[side_of(rank)].writes;
  }

  // queued_from is how many bytes `rank` wrote that the other side has not
  // read yet.
  size_t queued_from(int rank) const {
    std::lock_guard<std::mutex> lock(mu_);
    return sides_[side_of(rank)].out.size;
  }

 private:
  friend class MemoryLink;

  // ByteQueue is a ring of bytes: `size` bytes from `head` on, wrapping.
  struct ByteQueue {
    std::vector<uint8_t> data;
    size_t head = 0;
    size_t size = 0;

    size_t room() const { return data.size() - size; }
    void push(const uint8_t* from, size_t n) {  // n <= room()
      const size_t cap = data.size();
      const size_t at = (head + size) % cap;
      const size_t first = std::min(n, cap - at);
      std::memcpy(data.data() + at, from, first);
      std::memcpy(data.data(), from + first, n - first);
      size += n;
    }
    void pop(uint8_t* into, size_t n) {  // n <= size
      const size_t cap = data.size();
      const size_t first = std::min(n, cap - head);
      std::memcpy(into, data.data() + head, first);
      std::memcpy(into + first, data.data(), n - first);
      head = (head + n) % cap;
      size -= n;
    }
  };

  // Side is one rank's end of the pipe; what it writes waits in `out`.
  struct Side {
    int rank = -1;
    int doorbell = -1;      // eventfd: rung to wake this side
    bool sleeping = false;  // between about_to_sleep and awake
    bool closed = false;    // close() or its link's shut_down
    ByteQueue out;
    bool cut = false;  // cut_after: `cut_left` more bytes go through, then the end
    size_t cut_left = 0;
    size_t writes = 0;
  };

  int side_of(int rank) const {
    if (rank == sides_[0].rank) return 0;
    if (rank == sides_[1].rank) return 1;
    throw std::invalid_argument("rank " + std::to_string(rank) + " is on neither side of this pipe");
  }

  // ring wakes side s. mu_ held (an eventfd write never blocks).
  void ring(int s) const {
    const uint64_t one = 1;
    ssize_t ignored = ::write(sides_[s].doorbell, &one, sizeof one);
    (void)ignored;
  }

  bool past_cut(const Side& s) const { return s.cut && s.cut_left == 0; }

  // write_locked takes what fits of iov[0..n) from side s. mu_ held.
  LinkIo write_locked(int s, const iovec* iov, size_t n) {
    Side& me = sides_[s];
    if (broken_) return LinkIo::failed(broken_);
    if (me.closed || sides_[1 - s].closed) return LinkIo::failed(EPIPE);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += iov[i].iov_len;
    if (total == 0) return LinkIo::blocked();
    if (past_cut(me)) return LinkIo::moved(total);  // lost on the way
    size_t take = std::min({total, me.out.room(), options_.chunk});
    if (me.cut) take = std::min(take, me.cut_left);
    if (take == 0) return LinkIo::blocked();
    size_t left = take;
    for (size_t i = 0; i < n && left > 0; ++i) {
      const size_t part = std::min(left, iov[i].iov_len);
      me.out.push(static_cast<const uint8_t*>(iov[i].iov_base), part);
      left -= part;
    }
    ++me.writes;
    if (me.cut) {
      me.cut_left -= take;
      if (me.cut_left == 0) ring(1 - s);  // the reader must come and see the end
    }
    return LinkIo::moved(take);
  }

  LinkIo write(int s, const iovec* iov, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    return write_locked(s, iov, n);
  }

  // write_whole writes all n bytes if they fit now, as ShmLink does.
  Status write_whole(int s, const void* data, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!past_cut(sides_[s]) && sides_[s].out.room() < n) return network_error("no room in the memory pipe");
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t done = 0; done < n;) {
      iovec iov{const_cast<uint8_t*>(p + done), n - done};
      const LinkIo io = write_locked(s, &iov, 1);
      if (io.outcome != LinkIo::Outcome::kMoved) {
        return network_error(std::string("writing to the memory pipe failed: ") +
                             std::strerror(io.error ? io.error : EAGAIN));
      }
      done += io.bytes;
    }
    return Status::ok_status();
  }

  LinkIo read(int s, void* into, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    Side& me = sides_[s];
    Side& peer = sides_[1 - s];
    if (broken_) return LinkIo::failed(broken_);
    if (me.closed) return LinkIo::ended();  // a side that ended reads nothing more
    if (peer.out.size > 0 && n > 0) {
      const size_t take = std::min({n, peer.out.size, options_.chunk});
      peer.out.pop(static_cast<uint8_t*>(into), take);
      return LinkIo::moved(take);
    }
    if (peer.closed || past_cut(peer)) return LinkIo::ended();
    return LinkIo::blocked();
  }

  bool about_to_sleep(int s, bool has_sends) {
    std::lock_guard<std::mutex> lock(mu_);
    Side& me = sides_[s];
    const Side& peer = sides_[1 - s];
    me.sleeping = true;
    const bool something_to_read = peer.out.size > 0 || peer.closed || past_cut(peer) || broken_ != 0;
    return something_to_read || (has_sends && me.out.room() > 0);
  }

  void awake(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    sides_[s].sleeping = false;
  }

  void moved(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (sides_[1 - s].sleeping) ring(1 - s);
  }

  void shut_down(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    sides_[s].closed = true;
    ring(1 - s);
  }

  const MemoryPipeOptions options_;
  mutable std::mutex mu_;
  Side sides_[2];   // guarded by mu_ (rank and doorbell are fixed at construction)
  int broken_ = 0;  // guarded by mu_; the errno of break_pipe
};

// MemoryLink is one side of a MemoryPipe, as the engine sees it.
class MemoryLink : public Link {
 public:
  MemoryLink(std::shared_ptr<MemoryPipe> pipe, int side)
      : pipe_(std::move(pipe)),
        side_(side),
        address_("memory:" + std::to_string(pipe_->sides_[1 - side].rank)) {}
  ~MemoryLink() override { pipe_->shut_down(side_); }
  MemoryLink(const MemoryLink&) = delete;
  MemoryLink& operator=(const MemoryLink&) = delete;

  const std::string& address() const override { return address_; }
  bool ready() const override { return true; }
  LinkIo write(const iovec* iov, size_t n) override { return pipe_->write(side_, iov, n); }
  LinkIo read(void* out, size_t n) override { return pipe_->read(side_, out, n); }
  Status write_whole(const void* data, size_t n, Deadline deadline) override {
    (void)deadline;  // like a ring: whole now or not at all
    return pipe_->write_whole(side_, data, n);
  }
  bool moves_in_user_space() const override { return true; }
  LinkPoll poll(bool has_sends) const override {
    (void)has_sends;  // bytes move without the descriptor; it only wakes
    return {pipe_->sides_[side_].doorbell, POLLIN};
  }
  Status on_ready(short revents, bool* became_ready) override {
    (void)revents;
    *became_ready = false;
    uint64_t rings = 0;
    ssize_t ignored = ::read(pipe_->sides_[side_].doorbell, &rings, sizeof rings);  // resets the count
    (void)ignored;
    return Status::ok_status();
  }
  bool about_to_sleep(bool has_sends) override { return pipe_->about_to_sleep(side_, has_sends); }
  void awake() override { pipe_->awake(side_); }
  void moved() override { pipe_->moved(side_); }
  void shut_down() override { pipe_->shut_down(side_); }

 private:
  std::shared_ptr<MemoryPipe> pipe_;
  const int side_;
  const std::string address_;
};

inline std::unique_ptr<Link> MemoryPipe::end_of(int rank) {
  return std::make_unique<MemoryLink>(shared_from_this(), side_of(rank));
}

// MemoryGroup is `n` engines, ranks 0..n-1 of one group, every two of them
// joined by a MemoryPipe.
struct MemoryGroup {
  std::vector<std::unique_ptr<Engine>> engines;
  // pipes[a][b], the same as pipes[b][a], joins ranks a and b; null for a == b.
  std::vector<std::vector<std::shared_ptr<MemoryPipe>>> pipes;

  Engine& engine(int rank) { return *engines[static_cast<size_t>(rank)]; }
  MemoryPipe& pipe(int a, int b) { return *pipes[static_cast<size_t>(a)][static_cast<size_t>(b)]; }
};

// memory_group builds the engines of a group of `n`, fully connected by
// memory pipes shaped by `options`.
inline MemoryGroup memory_group(int n, MemoryPipeOptions options = {},
                                const EngineOptions& engine_options = {}) {
  const auto size = static_cast<size_t>(n);
  MemoryGroup group;
  group.pipes.assign(size, std::vector<std::shared_ptr<MemoryPipe>>(size));
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      auto joining = std::make_shared<MemoryPipe>(a, b, options);
      group.pipes[static_cast<size_t>(a)][static_cast<size_t>(b)] = joining;
      group.pipes[static_cast<size_t>(b)][static_cast<size_t>(a)] = joining;
    }
  }
  for (int r = 0; r < n; ++r) {
    std::vector<std::unique_ptr<Link>> links(size);
    for (int q = 0; q < n; ++q) {
      if (q != r) links[static_cast<size_t>(q)] = group.pipe(r, q).end_of(r);
    }
    group.engines.push_back(std::make_unique<Engine>(r, n, std::move(links), nullptr, engine_options));
  }
  return group;
}

}  // namespace cohort::testing
