// torch_errors.h: cohort's exceptions as the classes torch's own backends
// raise for the same failure, at the boundary to torch (docs/errors.md).
//
// torch translates its c10 errors into Python classes that fault-tolerant
// trainers and torchelastic catch: a dead peer is DistNetworkError, a
// timeout, desync or backend failure DistBackendError, a store's failure
// DistStoreError (all DistError, a RuntimeError). cohort's message is kept
// whole; every other exception passes as it is.
#pragma once

#include <exception>

#include "cohort/errors.h"

namespace cohort_torch {

// as_torch_error: `e` as torch's class for it (null stays null).
std::exception_ptr as_torch_error(std::exception_ptr e);

// rethrow_as_torch_error throws as_torch_error(e).
[[noreturn]] void rethrow_as_torch_error(std::exception_ptr e);

// with_torch_error_kinds runs `f` (a backend call that may fail at once,
// as a blocking collective does) and throws its cohort error as torch's.
template <class F>
auto with_torch_error_kinds(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const cohort::Error&) {
    rethrow_as_torch_error(std::current_exception());
  }
}

}  // namespace cohort_torch
