// status.h: errors as values inside cohort.
//
// Internal code returns Status (or Result<T>) instead of throwing, so that an
// error can travel from an I/O thread to the caller's thread. The public API
// turns a Status into the matching cohort::Error subclass with throw_if_error.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace cohort {

struct RelayedCause;  // common/relayed_cause.h

// StatusCode maps one to one onto the public exception classes.
enum class StatusCode {
  kOk,
  kStoreError,
  kNetworkError,
  kTimeout,
  kInvalidArgument,
  kDesync,
  kBackendError,
};

// Status is a copyable error value: a code and a message for a person,
// and, for a failure another rank relayed, its cause as fields.
// [[nodiscard]]: a call whose Status nobody reads is an error lost; where
// ignoring one is right, say why and cast it to void.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), detail_(std::make_unique<Detail>(Detail{std::move(message), nullptr})) {}
  Status(const Status& other) : code_(other.code_) {
    if (other.detail_) detail_ = std::make_unique<Detail>(*other.detail_);
  }
  Status& operator=(const Status& other) {
    if (this != &other) *this = Status(other);
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return detail_ ? detail_->message : empty_message(); }
  // cause: for a failure relayed from another rank, where it came from and
  // its words as fields (relayed_cause.h), for relaying it on; else null.
  const std::shared_ptr<const RelayedCause>& cause() const { return detail_ ? detail_->cause : no_cause(); }

  // with_context returns this error with "context: " in front of the
  // message (and the same cause).
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    Status out(code_, context + ": " + message());
    out.detail_->cause = cause();
    return out;
  }
  // with_cause returns this error, moved, carrying `cause`.
  Status with_cause(std::shared_ptr<const RelayedCause> cause) && {
    if (detail_) detail_->cause = std::move(cause);
    return std::move(*this);
  }

 private:
  static const std::string& empty_message();
  static const std::shared_ptr<const RelayedCause>& no_cause();

  struct Detail {
    std::string message;
    std::shared_ptr<const RelayedCause> cause;
  };
  StatusCode code_ = StatusCode::kOk;
  // The message lives on the heap, and only an error has one: a Status is
  // made and dropped several times by every operation, and an ok one is
  // then two words to set and a null test to destroy (a std::string inline
  // cost a few dozen instructions per operation).
  std::unique_ptr<Detail> detail_;
};

inline Status store_error(std::string m) {
  return Status(StatusCode::kStoreError, std::move(m));
}
inline Status network_error(std::string m) {
  return Status(StatusCode::kNetworkError, std::move(m));
}
inline Status timeout_error(std::string m) {
  return Status(StatusCode::kTimeout, std::move(m));
}
inline Status invalid_argument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}

// throw_status throws the cohort::Error subclass that matches `status`.
[[noreturn]] void throw_status(const Status& status);

// status_exception returns the cohort::Error subclass for `status` as an
// exception_ptr (for Work, which carries errors across threads).
std::exception_ptr status_exception(const Status& status);

// throw_if_error throws when `status` is not ok.
inline void throw_if_error(const Status& status) {
  if (!status.ok()) throw_status(status);
}

// Result holds a value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }

  // value_or_throw returns the value, or throws the matching cohort::Error.
  T value_or_throw() && {
    throw_if_error(status_);
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace cohort
