// elastic.h: what a program started by a launcher (cohortrun, torchrun,
// mpirun, srun) uses to fit in: its local rank, and an error file that tells
// the launcher why it died.
//
//   int main(int argc, char** argv) {
//     return cohort::record_errors([&] { return real_main(argc, argv); });
//   }
//
// An exception that escapes real_main is written, with the stack where it
// was thrown, to the file named by TORCHELASTIC_ERROR_FILE (cohortrun and
// torchrun set it) as torch's elastic error JSON:
//   {"message": {"message": "<type>: <what>",
//                "extraInfo": {"py_callstack": "<stack>", "timestamp": "<unix s>"}}}
// The launcher's failure summary then shows that message as the root cause.
#pragma once

#include <functional>
#include <string>

namespace cohort {

// record_errors installs the error handler (install_error_handler) and
// returns main_fn's result. An exception escaping main_fn is recorded in the
// error file, printed on stderr, and the process exits with code 1.
int record_errors(const std::function<int()>& main_fn);

// install_error_handler makes std::terminate record the uncaught exception
// (type, message, stack of the throw) in the error file, print it and exit
// with code 1. The stack is the thrower's because nothing unwinds an
// exception no one catches. Safe to call more than once.
void install_error_handler();

// write_error_file writes `message` and `stack` to TORCHELASTIC_ERROR_FILE
// (or COHORT_ERROR_FILE) in torch's format; returns false when neither is
// set or the file cannot be written. The file is written under a temporary
// name and renamed, so the launcher never reads half of it.
bool write_error_file(const std::string& message, const std::string& stack);

// local_rank is this process's rank on its host: LOCAL_RANK (cohortrun,
// torchrun), else OMPI_COMM_WORLD_LOCAL_RANK (mpirun), else SLURM_LOCALID
// (srun), else 0.
int local_rank();

// local_world_size is how many ranks run on this host: LOCAL_WORLD_SIZE,
// else OMPI_COMM_WORLD_LOCAL_SIZE, else SLURM_NTASKS_PER_NODE, else 1.
int local_world_size();

}  // namespace cohort
