#include "torch_errors.h"

#include <c10/util/Exception.h>

#include "cohort/errors.h"

namespace cohort_torch {

[[noreturn]] void rethrow_as_torch_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const cohort::NetworkError& x) {
    C10_THROW_ERROR(DistNetworkError, x.what());
  } catch (const cohort::StoreError& x) {
    C10_THROW_ERROR(DistStoreError, x.what());
  } catch (const cohort::TimeoutError& x) {
    C10_THROW_ERROR(DistBackendError, x.what());
  } catch (const cohort::DesyncError& x) {
    C10_THROW_ERROR(DistBackendError, x.what());
  } catch (const cohort::BackendError& x) {
    C10_THROW_ERROR(DistBackendError, x.what());
  }
}

std::exception_ptr as_torch_error(std::exception_ptr e) {
  if (!e) return e;
  try {
    rethrow_as_torch_error(e);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace cohort_torch
