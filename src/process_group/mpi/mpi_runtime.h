// mpi_runtime.h: the process-wide side of MPI for the MPI backend: MPI is
// initialised once per process (MPI_Init_thread, at least
// MPI_THREAD_SERIALIZED) and finalised at exit; cohort's dtypes and
// ReduceOps map to MPI datatypes and operations here.
//
// MPI is process-global by nature, so this file holds the one piece of
// global state of the MPI backend (besides MPI's own): the thread level it
// got and the datatypes/ops it created for float16 and bfloat16.
#pragma once

#include <mpi.h>

#include <mutex>
#include <string>

#include "cohort/types.h"
#include "common/status.h"

namespace cohort::mpi {

// ensure_initialized calls MPI_Init_thread the first time, asking for
// MPI_THREAD_SERIALIZED as torch does: cohort never calls MPI from two
// threads at once (CallLock), and MPI_THREAD_MULTIPLE makes Open MPI lock
// inside every call. It registers MPI_Finalize to run at exit. If the program initialised MPI itself, its
// thread level is checked and finalising is left to it. Thread-safe.
Status ensure_initialized();

// world_rank and world_size are MPI_COMM_WORLD's (after ensure_initialized).
int world_rank();
int world_size();

// CallLock serialises MPI calls from different cohort threads when MPI gave
// only MPI_THREAD_SERIALIZED (several groups each have a worker thread; a
// blocking collective of one group holds it, so groups of one process take
// turns, as with torch's ProcessGroupMPI); with MPI_THREAD_MULTIPLE (a
// program that initialised MPI so itself) it does nothing.
class CallLock {
 public:
  CallLock();
  ~CallLock();
  CallLock(const CallLock&) = delete;
  CallLock& operator=(const CallLock&) = delete;

 private:
  bool locked_;
};

// datatype is the MPI datatype of `dtype`. float16 and bfloat16 have none
// in MPI: each is a committed 2-byte contiguous type of our own, reduced by
// the user ops of `reduce_operation`.
MPI_Datatype datatype(DType dtype);

// reduce_operation is the MPI_Op that reduces `dtype` as `kind` does (SUM
// for AVG and PREMUL_SUM: the backend scales around it), or
// InvalidArgument naming the op and the backend when MPI cannot express it.
Result<MPI_Op> reduce_operation(DType dtype, ReduceOp::Kind kind);

// check turns an MPI return code into a Status naming the call.
Status check(int rc, const char* call, const std::string& what);

}  // namespace cohort::mpi
