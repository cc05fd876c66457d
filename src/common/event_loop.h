// event_loop.h: one thread, many file descriptors (epoll), timers, and a
// queue through which other threads hand the loop work.
//
// Threading: watch/modify/unwatch/add_timer/cancel_timer may only be called
// on the loop's thread (from a handler or a posted closure). post() and
// stop() may be called from any thread. See docs/threading.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/deadline.h"

namespace cohort {

class EventLoop {
 public:
  using IoHandler = std::function<void(uint32_t events)>;
  using TimerId = uint64_t;

  // Creates the epoll instance; throws NetworkError when the system refuses.
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // watch calls `handler` with the ready events (EPOLLIN, ...) of `fd`.
  void watch(int fd, uint32_t events, IoHandler handler);
  // modify changes the events `fd` is watched for.
  void modify(int fd, uint32_t events);
  // unwatch stops watching `fd`; call it before closing the descriptor.
  void unwatch(int fd);

  // add_timer runs `fn` on the loop at `when` (once) unless cancelled.
  TimerId add_timer(Clock::time_point when, std::function<void()> fn);
  void cancel_timer(TimerId id);

  // post runs `fn` on the loop's thread soon. Thread-safe.
  void post(std::function<void()> fn);

  // set_spin makes run() keep polling (without sleeping) for `spin` after
  // the last event it handled, so that a quick follow-up finds the thread
  // awake instead of paying a wake-up. Call before run().
  void set_spin(std::chrono::microseconds spin) { spin_ = spin; }

  // run serves events until stop() is called. Runs on the caller's thread.
  void run();
  // stop makes run() return after the current iteration. Thread-safe.
  void stop();

 private:
  struct Watch {
    uint32_t generation;
    std::shared_ptr<IoHandler> handler;
  };
  void drain_posted();
  void fire_due_timers();
  int next_timeout_ms() const;

  std::chrono::microseconds spin_{0};
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that post() and stop() write to
  uint32_t next_generation_ = 1;
  std::unordered_map<int, Watch> watches_;  // loop thread only
  std::map<std::pair<Clock::time_point, TimerId>, std::function<void()>> timers_;
  std::unordered_map<TimerId, Clock::time_point> timer_when_;
  TimerId next_timer_ = 1;

  std::mutex posted_mu_;
  std::vector<std::function<void()>> posted_;  // guarded by posted_mu_
  bool stopping_ = false;                      // guarded by posted_mu_
};

}  // namespace cohort
