// top_screen.h: one screen of cohort-top (docs/stragglers.md), from a
// group's summary and its ranks' records as the straggler accounting
// publishes them (arrival_accounting.h). cohort-top (cohort's store) and
// `python -m cohort_torch.top` (torch's store) both print it.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace cohort {

// top_screen writes the screen: a heading with `address`, the group and
// the time; a line per rank (records[r], null where a rank has not
// published); the straggler line; a legend.
std::string top_screen(const std::string& address, const std::string& group, const Json& summary,
                       const std::vector<Json>& records);

}  // namespace cohort
