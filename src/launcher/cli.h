// cli.h: cohortrun's command line (torchrun's flags) to a LaunchConfig.
#pragma once

#include <string>

#include "launcher/launch_config.h"

namespace cohort::launcher {

// CliOutcome: run with the config, or exit now with `exit_code` (after
// --help, or after a usage error already printed).
struct CliOutcome {
  bool run = false;
  int exit_code = 0;
  LaunchConfig config;
};

// parse_command_line parses argv. Usage errors print a message naming the
// flag and value, and give exit code 2.
CliOutcome parse_command_line(int argc, char** argv);

}  // namespace cohort::launcher
