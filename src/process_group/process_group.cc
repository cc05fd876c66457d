// ProcessGroup: argument checks on the caller's thread, then one worker
// thread per group that runs operations in call order (docs/threading.md).
// A blocking collective that finds the group idle runs on the caller's
// thread instead (process_group_ops.cc): handing it to the worker and back
// costs two thread wake-ups, more than a whole small collective over
// shared memory.
#include "cohort/process_group.h"

#include <numeric>

#include "cohort/errors.h"
#include "cohort/store.h"
#include "common/logging.h"
#include "process_group/backend.h"
#include "process_group/desync_check.h"
#include "process_group/group_log.h"
#include "process_group/group_monitor.h"
#include "process_group/group_trace.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {}  // namespace

ProcessGroup::ProcessGroup(std::unique_ptr<Backend> backend, int rank, std::vector<int> global_ranks,
                           std::string name, std::chrono::milliseconds timeout, std::shared_ptr<Store> store)
    : backend_(std::move(backend)),
      rank_(rank),
      global_ranks_(std::move(global_ranks)),
      name_(std::move(name)),
      timeout_(timeout),
      store_(std::move(store)),
      done_work_(std::make_shared<Work>("a blocking collective of group " + name_ + ", complete")),
      trace_(std::make_shared<GroupTrace>(name_, rank_, global_ranks_, backend_->name(), store_,
                                          trace_buffer_entries())),
      monitored_(std::make_unique<MonitorLease>(trace_)) {
  done_work_->complete(nullptr);
  desync_ = DesyncCheck::make(*backend_, rank_, size(), name_, store_);
  log_group_created(*this, *backend_, desync_.get());  // COHORT_DEBUG=info
  worker_ = std::thread([this] { worker_loop(); });
}

ProcessGroup::~ProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  backend_->wake();
  worker_.join();
  // Pending point-to-point requests complete (with an error) as the
  // backend's transport goes away.
  backend_.reset();
}

std::string ProcessGroup::backend_name() const {
  return backend_->name();
}

void ProcessGroup::check_rank(int r, const char* what) const {
  if (r < 0 || r >= size()) {
    throw InvalidArgument(std::string(what) + " is " + std::to_string(r) + ", out of range for group " +
                          name_ + " of " + std::to_string(size()) + " ranks");
  }
}

void ProcessGroup::worker_loop() {
  for (;;) {
    std::pair<std::shared_ptr<Work>, Task> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while ((queue_.empty() || driving_) && !stopping_) {
        if (!driving_ && backend_->has_pending()) {
          // isend/irecv in flight: drive them until new work (or stop) wakes us.
          driving_ = true;
          lock.unlock();
          backend_->progress(Deadline::never());
          lock.lock();
          driving_ = false;
        } else {
          cv_.wait(lock);
        }
      }
      if (stopping_) break;  // what is still queued is cancelled below
      item = std::move(queue_.front());
      queue_.pop_front();
      driving_ = true;
    }
    run_task(*item.first, item.second);
    {
      std::lock_guard<std::mutex> lock(mu_);
      driving_ = false;
    }
  }
  // Whatever is still queued fails with a clear reason, each Work once.
  std::deque<std::pair<std::shared_ptr<Work>, Task>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(queue_);
  }
  for (auto& item : left) {
    item.first->complete(status_exception(
        Status(StatusCode::kBackendError,
               item.first->description() + " was cancelled: group " + name_ + " was destroyed")));
  }
}

void ProcessGroup::run_task(Work& work, const Task& task) {
  if (broken_) return work.complete(broken_);
  try {
    task();
  } catch (...) {
    // A throwing task is a bug in cohort; its Work still completes.
    work.complete(std::current_exception());
  }
}

std::shared_ptr<Work> ProcessGroup::enqueue(const std::string& op, const OpShape& shape,
                                            const CollectiveOptions& options,
                                            std::function<void(Work&, const OpContext&)> run,
                                            bool is_collective) {
  const auto timeout = options.timeout.count() > 0 ? options.timeout : timeout_;
  // The deadline counts from the call, not from when the worker gets to it.
  const Deadline deadline = Deadline::after(timeout);
  std::shared_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw InvalidArgument(op + ": group " + name_ + " is being destroyed");
    // Numbered under the queue's lock, so that numbers follow queue order
    // even when several threads issue operations. Collectives are numbered
    // alike on every rank (their messages carry the number); point-to-point
    // calls need not match up, so they count apart.
    const uint64_t seq = is_collective ? ++sequence_ : ++p2p_sequence_;
    std::string text;
    text.reserve(op.size() + name_.size() + 40);
    text.append(op).append(is_collective ? " #" : " (p2p #").append(std::to_string(seq));
    text.append(is_collective ? "" : ")").append(" of group ").append(name_);
    work = std::make_shared<Work>(std::move(text));
    OpContext context{seq, deadline, &work->description(), work};
    context.trace = trace_->recorder().scheduled(op, shape, seq, is_collective);
    queue_.emplace_back(work, [this, work, context, run = std::move(run)] {
      trace_->recorder().started(context.trace);
      run(*work, context);
    });
  }
  cv_.notify_one();
  backend_->wake();
  if (!options.async_op) work->wait();
  return work;
}

bool ProcessGroup::claim_inline(uint64_t* sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || driving_ || !queue_.empty()) return false;
  driving_ = true;
  *sequence = ++sequence_;
  return true;
}

void ProcessGroup::release_inline() {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Work queued meanwhile, or requests left in flight, need the worker.
    wake = !queue_.empty() || backend_->has_pending();
    driving_ = false;
  }
  // Only then: a needless wake-up costs more than a small collective.
  if (wake) cv_.notify_one();
}

// mark_broken makes the group refuse new work after `what` failed: its
// peers may be gone or out of step, and later operations would hang or mix
// up messages. The error keeps its class (NetworkError, TimeoutError, ...).
void ProcessGroup::mark_broken(std::exception_ptr error, const std::string& what) {
  if (broken_) return;
  StatusCode code = StatusCode::kNetworkError;
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    code = StatusCode::kTimeout;
    message = e.what();
  } catch (const DesyncError& e) {
    code = StatusCode::kDesync;
    message = e.what();
  } catch (const std::exception& e) {
    message = e.what();
  }
  broken_ = status_exception(Status(code, "group " + name_ + " can no longer be used because " + what +
                                              " failed (create a new group): " + message));
}

void ProcessGroup::abort(const std::string& reason) {
  backend_->abort(Status(StatusCode::kNetworkError, "group " + name_ + " was aborted: " + reason));
}

std::vector<int> ProcessGroup::lost_ranks() const {
  return backend_->lost_peers();
}

bool ProcessGroup::can_shrink() const {
  return backend_->can_shrink() && store_ != nullptr;
}

}  // namespace cohort
