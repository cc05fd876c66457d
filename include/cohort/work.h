// work.h: the handle of an operation that may still be running.
//
// Every collective and point-to-point call returns a Work. With
// async_op=false the call has already waited and the Work is complete (for
// a successful blocking collective, possibly one Work the group shares);
// with async_op=true the buffers belong to the operation until wait()
// returns. A Work completes exactly once, with success or an error, and
// every callback given to then() runs exactly once, also when the group is
// shut down or aborted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cohort {

class Work : public std::enable_shared_from_this<Work> {
 public:
  // `description` names the operation in messages ("all_reduce #5 of group 0").
  explicit Work(std::string description);
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // wait blocks until the operation completes and rethrows its error.
  // `timeout` (0: none) bounds only this wait: past it, wait throws
  // TimeoutError naming the operation, which still runs on against its own
  // deadline. Returns true.
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  bool is_completed() const;
  // is_success is true once completed without error.
  bool is_success() const;
  // exception is the error the operation failed with, or null.
  std::exception_ptr exception() const;
  // source_rank is the group rank a recv from any source received from, or -1.
  int source_rank() const;

  // then runs `callback` once the operation completes (at once, on this
  // thread, when it already has); otherwise on the thread that completes it:
  // the group's worker, or a thread whose blocking call runs on the idle
  // group itself (an isend's callback may run inside a later blocking
  // send or recv of the same group, on the caller's thread). A callback
  // must not wait for the group (a synchronous call from it would wait for
  // itself), nor take a lock its group's callers hold around their calls,
  // nor drop the last reference to the group.
  void then(std::function<void(Work&)> callback);

  // get_future returns a future that becomes ready when the operation does
  // (holding its error, if any).
  std::shared_future<void> get_future();

  const std::string& description() const { return description_; }

 private:
  // Only the group that ran the operation completes its Work (a user who
  // could complete one could end an operation that is still writing into
  // its buffers); WorkTestPeer lets the unit tests drive one by hand.
  friend class ProcessGroup;
  friend struct WorkTestPeer;
  // complete finishes the Work, once; later calls are ignored, so shutdown
  // paths may call it defensively.
  void complete(std::exception_ptr error, int source_rank = -1);

  const std::string description_;
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool completed_ = false;
  std::exception_ptr error_;
  int source_rank_ = -1;
  std::vector<std::function<void(Work&)>> callbacks_;
  // Made on the first get_future(): a promise costs an allocation and a
  // futex wake-up per completion, more than a small collective itself.
  std::unique_ptr<std::promise<void>> promise_;
  std::shared_future<void> future_;
};

}  // namespace cohort
