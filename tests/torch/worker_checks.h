// worker_checks.h: what the libtorch layer's worker programs share: a
// check that, when it fails, says what was wrong on this rank and is
// counted, so that the worker exits 1 after reporting every failure.
#pragma once

#include <cstdio>
#include <string>

namespace cohort::testing {

// WorkerChecks is one worker's rank (set once it joined) and its failures.
struct WorkerChecks {
  int rank = -1;
  int failures = 0;
};

inline WorkerChecks& worker_checks() {
  static WorkerChecks checks;  // one per worker process
  return checks;
}

inline void check(bool ok, const std::string& what) {
  if (ok) return;
  ++worker_checks().failures;
  std::printf("rank %d wrong: %s\n", worker_checks().rank, what.c_str());
  std::fflush(stdout);
}

}  // namespace cohort::testing
