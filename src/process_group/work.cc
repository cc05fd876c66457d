#include "cohort/work.h"

#include "cohort/errors.h"
#include "common/logging.h"

namespace cohort {

Work::Work(std::string description) : description_(std::move(description)) {}

Work::~Work() = default;

bool Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout.count() > 0) {
    if (!done_cv_.wait_for(lock, timeout, [&] { return completed_; })) {
      throw TimeoutError("wait on " + description_ + " timed out after " + std::to_string(timeout.count()) +
                         " ms (the operation itself goes on until its own timeout)");
    }
  } else {
    done_cv_.wait(lock, [&] { return completed_; });
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

bool Work::is_success() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ && !error_;
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

int Work::source_rank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return source_rank_;
}

void Work::then(std::function<void(Work&)> callback) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!completed_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(*this);
}

std::shared_future<void> Work::get_future() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!promise_) {
    promise_ = std::make_unique<std::promise<void>>();
    future_ = promise_->get_future().share();
    if (completed_) {
      if (error_) {
        promise_->set_exception(error_);
      } else {
        promise_->set_value();
      }
    }
  }
  return future_;
}

void Work::complete(std::exception_ptr error, int source_rank) {
  std::vector<std::function<void(Work&)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (completed_) return;
    completed_ = true;
    error_ = error;
    source_rank_ = source_rank;
    callbacks.swap(callbacks_);
    // A future asked for before completion is set here, exactly once (a
    // later get_future() sets its own at once).
    if (promise_) {
      if (error) {
        promise_->set_exception(error);
      } else {
        promise_->set_value();
      }
    }
  }
  done_cv_.notify_all();
  for (auto& cb : callbacks) {
    try {
      cb(*this);
    } catch (const std::exception& e) {
      // A throwing callback must not keep the others from running.
      COHORT_LOG(kError) << "a callback on " << description_ << " threw: " << e.what();
    } catch (...) {
      COHORT_LOG(kError) << "a callback on " << description_
                         << " threw something that is not a std::exception";
    }
  }
}

}  // namespace cohort
