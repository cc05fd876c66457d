// agent.h: cohortrun's main loop (torch's elastic agent): meet the other
// nodes, start this node's workers, watch them, and on a failure anywhere
// stop them all and start the next round, until the job succeeds, runs out
// of restarts, or the launcher is told to stop. Returns the exit code
// (launcher/exit_codes.h).
#pragma once

#include "launcher/launch_config.h"

namespace cohort::launcher {

int run_agent(const LaunchConfig& config);

}  // namespace cohort::launcher
