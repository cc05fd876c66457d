// cohort-trace: reads the flight-recorder dumps of a job (COHORT_TRACE_DIR)
// and says why it hangs or failed, or who the ranks waited for.
//
//   cohort-trace DIR
//   cohort-trace --stragglers [--json] DIR
//
// The first prints which dumps it read, then one line per finding (see
// docs/flight_recorder.md), e.g.
//   group default collective #5 (all_reduce, 4 MiB float32): ranks {1} never
//   started it; rank 1's last completed is #4
// and exits 0 when every group is in step, 1 when something is wrong (a
// stuck or mismatched operation, a missing dump), 2 when no dump could be
// read. With --stragglers it ranks each group's ranks by the time the
// others spent waiting for them (docs/stragglers.md), as text or JSON, and
// exits 0 (1 for a missing or unreadable dump, 2 for none).
#include <cstdio>
#include <cstring>
#include <string>

#include "diagnostics/trace_dump.h"
#include "diagnostics/trace_stragglers.h"
#include "diagnostics/trace_verdict.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: cohort-trace DIR                       why a job hangs or failed\n"
               "       cohort-trace --stragglers [--json] DIR who the ranks waited for\n"
               "(DIR: the COHORT_TRACE_DIR of a job)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool stragglers = false, json = false;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--stragglers") == 0) {
      stragglers = true;
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (argv[i][0] == '-' || !dir.empty()) {
      std::fprintf(stderr, "cohort-trace: unexpected argument '%s'\n", argv[i]);
      return usage();
    } else {
      dir = argv[i];
    }
  }
  if (dir.empty() || (json && !stragglers)) return usage();
  std::vector<std::string> problems;
  auto dumps = cohort::read_rank_dumps(dir, &problems);
  if (!dumps.ok()) {
    std::fprintf(stderr, "cohort-trace: %s\n", dumps.status().message().c_str());
    return 2;
  }
  FILE* notes = json ? stderr : stdout;
  for (const std::string& p : problems) std::fprintf(notes, "unreadable dump %s\n", p.c_str());
  if (dumps.value().empty()) {
    std::fprintf(stderr, "cohort-trace: no rank_*.json dump in %s\n", dir.c_str());
    return 2;
  }
  std::string ranks;
  for (const auto& d : dumps.value()) ranks += (ranks.empty() ? "" : ",") + std::to_string(d.global_rank);
  std::fprintf(notes, "read %zu dumps from %s (ranks {%s})\n", dumps.value().size(), dir.c_str(),
               ranks.c_str());
  if (stragglers) {
    const cohort::StragglerVerdict verdict = cohort::analyze_stragglers(dumps.value());
    if (json) {
      std::printf("%s\n", verdict.json.dump(2).c_str());
    } else {
      for (const std::string& line : verdict.lines) std::printf("%s\n", line.c_str());
    }
    return problems.empty() && !verdict.incomplete ? 0 : 1;
  }
  const cohort::Verdict verdict = cohort::analyze_dumps(dumps.value());
  for (const std::string& line : verdict.lines) std::printf("%s\n", line.c_str());
  return verdict.problems || !problems.empty() ? 1 : 0;
}
