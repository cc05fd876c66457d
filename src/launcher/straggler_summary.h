// straggler_summary.h: the launcher's one line on who the workers waited
// for, at the end of a job and at every restart (docs/stragglers.md).
//
// Each group's rank 0 keeps its latest summary in COHORT_STRAGGLER_DIR
// (cohortrun points it at the attempt's folder); the line is about the
// largest group found there, the world's. Only the node whose workers
// include that rank 0 has the file: the other nodes print nothing.
#pragma once

#include <optional>
#include <string>

namespace cohort::launcher {

// straggler_summary reads the summaries in `dir` and returns the line, or
// nothing when there is none (a job without collectives, accounting off,
// or the world's rank 0 on another node).
std::optional<std::string> straggler_summary(const std::string& dir);

}  // namespace cohort::launcher
