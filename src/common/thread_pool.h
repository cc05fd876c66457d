// thread_pool.h: a fixed set of threads that run tasks in the order given.
//
// RPC's workers (src/torch/rpc/) run the calls a worker receives here. A
// sleeping thread takes 25-50 µs to wake on these machines, more than a
// whole small call, so one idle thread at a time watches the queue for a
// while before it sleeps (the others sleep at once: many spinning threads
// would starve the ones doing the work).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/spin.h"

namespace cohort {

// IdleWork is what the watching thread does instead of only looking at
// the queue (RPC: it turns the wire, so that a call it reads it runs
// itself, with no hand-off). begin and end bracket a watch; turn does one
// step and says whether it did anything.
class IdleWork {
 public:
  virtual ~IdleWork() = default;
  virtual void begin() = 0;
  virtual bool turn() = 0;
  // found_work: the watch ends because a task came (this thread runs it
  // and watches again after), not because it timed out.
  virtual void end(bool found_work) = 0;
};

class ThreadPool {
 public:
  // spin: how long the watching thread looks before it sleeps.
  explicit ThreadPool(int threads, std::chrono::microseconds spin = std::chrono::microseconds(100),
                      IdleWork* idle = nullptr)
      : spin_(spin), idle_(idle) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
  ~ThreadPool() { stop(); }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
      queued_.fetch_add(1, std::memory_order_seq_cst);
    }
    // The watcher clears its flag before its last look under the mutex:
    // either it sees this task, or this thread sees no watcher and wakes
    // a sleeper.
    if (!watching_.load(std::memory_order_seq_cst)) cv_.notify_one();
  }

  // idle: nothing queued and nothing running.
  bool idle() const { return queued_.load() == 0 && running_.load() == 0; }

  // stop runs what is queued, then joins the threads.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_.load()) return;
      stopping_.store(true);
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      if (!watching_.exchange(true)) {
        // This thread watches: look without sleeping for a while.
        if (idle_) idle_->begin();
        auto until = Clock::now() + spin_;
        while (queued_.load(std::memory_order_acquire) == 0 && Clock::now() < until &&
               !stopping_.load(std::memory_order_relaxed)) {
          if (idle_ && idle_->turn()) {
            until = Clock::now() + spin_;  // work came: watch on
          } else {
            std::this_thread::yield();
          }
        }
        if (idle_) idle_->end(queued_.load(std::memory_order_acquire) > 0);
        watching_.store(false, std::memory_order_seq_cst);
      }
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;  // stopping, and nothing left
        task = std::move(queue_.front());
        queue_.pop_front();
        running_.fetch_add(1);
        queued_.fetch_sub(1);
      }
      task();
      running_.fetch_sub(1);
    }
  }
  const std::chrono::microseconds spin_;
  IdleWork* const idle_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  std::atomic<bool> stopping_{false};        // set under mu_
  std::atomic<size_t> queued_{0};
  std::atomic<size_t> running_{0};
  std::atomic<bool> watching_{false};
};

}  // namespace cohort
