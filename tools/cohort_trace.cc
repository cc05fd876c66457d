// cohort-trace: reads the flight-recorder dumps of a job (COHORT_TRACE_DIR)
// and says why it hangs or failed.
//
//   cohort-trace DIR
//
// Prints which dumps it read, then one line per finding (see
// docs/flight_recorder.md), e.g.
//   group default collective #5 (all_reduce, 4 MiB float32): ranks {1} never
//   started it; rank 1's last completed is #4
// Exits 0 when every group is in step, 1 when something is wrong (a stuck
// or mismatched operation, a missing dump), 2 when no dump could be read.
#include <cstdio>
#include <string>

#include "diagnostics/trace_dump.h"
#include "diagnostics/trace_verdict.h"

int main(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: cohort-trace DIR   (the COHORT_TRACE_DIR of a job)\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::string> problems;
  auto dumps = cohort::read_rank_dumps(dir, &problems);
  if (!dumps.ok()) {
    std::fprintf(stderr, "cohort-trace: %s\n", dumps.status().message().c_str());
    return 2;
  }
  for (const std::string& p : problems) std::printf("unreadable dump %s\n", p.c_str());
  if (dumps.value().empty()) {
    std::fprintf(stderr, "cohort-trace: no rank_*.json dump in %s\n", dir.c_str());
    return 2;
  }
  std::string ranks;
  for (const auto& d : dumps.value()) ranks += (ranks.empty() ? "" : ",") + std::to_string(d.global_rank);
  std::printf("read %zu dumps from %s (ranks {%s})\n", dumps.value().size(), dir.c_str(), ranks.c_str());
  const cohort::Verdict verdict = cohort::analyze_dumps(dumps.value());
  for (const std::string& line : verdict.lines) std::printf("%s\n", line.c_str());
  return verdict.problems || !problems.empty() ? 1 : 0;
}
