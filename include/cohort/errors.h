// errors.h: the exceptions cohort's public API throws.
//
// Every public call that fails throws a subclass of cohort::Error. The class
// says what a caller can do about it (see docs/errors.md); the message names
// what a person needs to act: rank, peer, key, address, the wrong value.
#pragma once

#include <stdexcept>
#include <string>

namespace cohort {

// Error is the root of every exception cohort throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// StoreError: a key-value store operation failed (server unreachable,
// connection lost, authentication refused). Retrying may help after the
// store is back; the keys already written are not lost.
class StoreError : public Error {
 public:
  using Error::Error;
};

// NetworkError: a peer is gone. The group it belonged to must be rebuilt.
class NetworkError : public Error {
 public:
  using Error::Error;
};

// TimeoutError: a blocking call passed its deadline. The message names what
// was still missing (keys, ranks) and the timeout that applied.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// InvalidArgument: the caller passed something wrong. Nothing was sent or
// changed; fix the call.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// DesyncError: ranks called different collectives (COHORT_DEBUG=detail).
class DesyncError : public Error {
 public:
  using Error::Error;
};

// BackendError: the backend (native, MPI, NCCL) reported a failure of its own.
class BackendError : public Error {
 public:
  using Error::Error;
};

}  // namespace cohort
