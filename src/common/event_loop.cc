#include "common/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cohort/errors.h"

namespace cohort {

EventLoop::EventLoop() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    throw NetworkError(std::string("cannot create the event loop: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = static_cast<uint64_t>(static_cast<uint32_t>(wake_fd_));
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
}

EventLoop::~EventLoop() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void EventLoop::watch(int fd, uint32_t events, IoHandler handler) {
  uint32_t gen = next_generation_++;
  if (next_generation_ == 0) next_generation_ = 1;  // 0 is the wake fd's
  watches_[fd] = Watch{gen, std::make_shared<IoHandler>(std::move(handler))};
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = (static_cast<uint64_t>(gen) << 32) | static_cast<uint32_t>(fd);
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void EventLoop::modify(int fd, uint32_t events) {
  auto it = watches_.find(fd);
  if (it == watches_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = (static_cast<uint64_t>(it->second.generation) << 32) | static_cast<uint32_t>(fd);
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::unwatch(int fd) {
  if (watches_.erase(fd) > 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

EventLoop::TimerId EventLoop::add_timer(Clock::time_point when, std::function<void()> fn) {
  TimerId id = next_timer_++;
  timers_.emplace(std::make_pair(when, id), std::move(fn));
  timer_when_.emplace(id, when);
  return id;
}

void EventLoop::cancel_timer(TimerId id) {
  auto it = timer_when_.find(id);
  if (it == timer_when_.end()) return;
  timers_.erase(std::make_pair(it->second, id));
  timer_when_.erase(it);
}

void EventLoop::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

void EventLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

void EventLoop::drain_posted() {
  uint64_t count;
  ssize_t ignored = ::read(wake_fd_, &count, sizeof count);
  (void)ignored;
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

void EventLoop::fire_due_timers() {
  auto now = Clock::now();
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto node = timers_.extract(timers_.begin());
    timer_when_.erase(node.key().second);
    node.mapped()();
  }
}

int EventLoop::next_timeout_ms() const {
  if (timers_.empty()) return -1;
  return Deadline::at(timers_.begin()->first.first).poll_timeout_ms();
}

void EventLoop::run() {
  constexpr int kMaxEvents = 256;
  epoll_event events[kMaxEvents];
  Clock::time_point last_event = Clock::now() - spin_;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(posted_mu_);
      if (stopping_) return;
    }
    int timeout = next_timeout_ms();
    if (spin_.count() > 0 && Clock::now() - last_event < spin_) timeout = 0;
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, timeout);
    if (n > 0) last_event = Clock::now();
    if (n < 0 && errno != EINTR) {
      throw NetworkError(std::string("epoll_wait failed: ") + std::strerror(errno));
    }
    for (int i = 0; i < n; ++i) {
      int fd = static_cast<int>(static_cast<uint32_t>(events[i].data.u64));
      uint32_t gen = static_cast<uint32_t>(events[i].data.u64 >> 32);
      if (gen == 0 && fd == wake_fd_) {
        drain_posted();
        continue;
      }
      auto it = watches_.find(fd);
      // A handler earlier in this batch may have closed this fd, and the
      // number may have been reused: the generation tells them apart.
      if (it == watches_.end() || it->second.generation != gen) continue;
      std::shared_ptr<IoHandler> handler = it->second.handler;  // survives unwatch
      (*handler)(events[i].events);
    }
    fire_due_timers();
  }
}

}  // namespace cohort
