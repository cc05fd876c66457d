// trace_verdict.h: what the flight-recorder dumps of a job's ranks say
// together; cohort-trace prints it (docs/flight_recorder.md).
//
// For each group: the first collective that not every rank completed, and
// which ranks never started it (the usual answer to "why does my job
// hang"); collectives the ranks disagree on (another op, dtype, root or
// size under the same sequence number); point-to-point operations left in
// flight; and, for the whole job, the ranks whose dump is missing. Ranks
// are global ranks throughout (the dump files are named by them).
#pragma once

#include <string>
#include <vector>

#include "diagnostics/trace_dump.h"

namespace cohort {

// Verdict is the analysis: one line per finding, in the order printed.
struct Verdict {
  std::vector<std::string> lines;
  // problems is true when something is wrong (a stuck or mismatched
  // operation, a missing dump); false when every group is in step.
  bool problems = false;
};

// analyze_dumps compares the dumps of one job (one per rank, any order).
Verdict analyze_dumps(const std::vector<RankDump>& dumps);

}  // namespace cohort
