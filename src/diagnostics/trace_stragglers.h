// trace_stragglers.h: who the ranks of a job waited for, read from their
// flight-recorder dumps after the fact (cohort-trace --stragglers;
// docs/stragglers.md).
//
// For each group, the collectives that every rank leaves together and
// that every rank's dump still holds, completed, are joined by sequence
// number; each rank's time in them (its own clock's start and end) goes
// through StragglerStats, as the live accounting does.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "diagnostics/trace_dump.h"

namespace cohort {

struct StragglerVerdict {
  std::vector<std::string> lines;  // as printed
  Json json;                       // {"groups": [{"group", "dumps", ...StragglerStats::to_json}]}
  bool named = false;              // some group has a straggler
  bool incomplete = false;         // some group's dumps are missing
};

StragglerVerdict analyze_stragglers(const std::vector<RankDump>& dumps);

}  // namespace cohort
