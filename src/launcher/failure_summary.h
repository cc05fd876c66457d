// failure_summary.h: the report a failed job ends with, in torchrun's
// layout: the program, every failed worker, and the root cause (the first
// failure seen) with its host, rank, exit code or signal and the message
// from its error file.
#pragma once

#include <string>
#include <vector>

#include "launcher/worker_group.h"

namespace cohort::launcher {

// failure_summary formats `failures` (the first is the root cause).
std::string failure_summary(const std::string& program, const std::vector<WorkerFailure>& failures);

}  // namespace cohort::launcher
