#include "common/status.h"

#include "cohort/errors.h"

namespace cohort {

const std::string& Status::empty_message() {
  static const std::string* const kEmpty = new std::string();  // never destroyed: used at exit too
  return *kEmpty;
}

const std::shared_ptr<const RelayedCause>& Status::no_cause() {
  static const auto* const kNone = new std::shared_ptr<const RelayedCause>();  // never destroyed, as above
  return *kNone;
}

void throw_status(const Status& status) {
  const std::string& m = status.message();
  switch (status.code()) {
    case StatusCode::kStoreError:
      throw StoreError(m);
    case StatusCode::kNetworkError:
      throw NetworkError(m);
    case StatusCode::kTimeout:
      throw TimeoutError(m);
    case StatusCode::kInvalidArgument:
      throw InvalidArgument(m);
    case StatusCode::kDesync:
      throw DesyncError(m);
    case StatusCode::kBackendError:
      throw BackendError(m);
    case StatusCode::kOk:
      break;
  }
  throw Error("throw_status called with an ok Status (a bug in cohort)");
}

std::exception_ptr status_exception(const Status& status) {
  try {
    throw_status(status);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace cohort
