// cohortrun: start and supervise the workers of a job on this node, as
// torchrun does (same flags, same worker environment). See docs/launcher.md.
//
//   cohortrun --standalone --nproc-per-node 4 ./train --epochs 3
#include <cstdio>

#include "cohort/errors.h"
#include "launcher/agent.h"
#include "launcher/cli.h"
#include "launcher/exit_codes.h"

int main(int argc, char** argv) {
  auto cli = cohort::launcher::parse_command_line(argc, argv);
  if (!cli.run) return cli.exit_code;
  try {
    return cohort::launcher::run_agent(cli.config);
  } catch (const cohort::Error& e) {
    std::fprintf(stderr, "cohortrun: %s\n", e.what());
    return cohort::launcher::kExitRendezvous;
  }
}
