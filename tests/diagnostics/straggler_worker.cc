// straggler_worker: one rank of a job with (or without) a straggler, for
// the tests of the straggler accounting (docs/stragglers.md).
//
//   straggler_worker VICTIM STEPS SLEEP_MS
//
// env:// from the environment. Every rank runs STEPS all_reduces of four
// floats, checking each sum; rank VICTIM (-1: none) sleeps SLEEP_MS before
// each. Rank 0 says "rank 0 step 1" after the first. At the end every rank
// writes its flight-recorder dump (with COHORT_TRACE_DIR), prints its
// cohort accounting's report on one line ("rank R report {...}"), waits
// for the others (a barrier) and leaves.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/process_group.h"
#include "diagnostics/group_monitor.h"

int main(int argc, char** argv) {
  using namespace cohort;
  if (argc != 4) {
    std::fprintf(stderr, "usage: straggler_worker VICTIM STEPS SLEEP_MS\n");
    return 2;
  }
  const int victim = std::atoi(argv[1]), steps = std::atoi(argv[2]), sleep_ms = std::atoi(argv[3]);
  try {
    InitOptions init;
    init.init_method = "env://";
    init_process_group(init);
    const int rank = get_rank(), world = get_world_size();
    std::vector<float> v(4);
    for (int step = 0; step < steps; ++step) {
      if (rank == victim) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      for (float& x : v) x = static_cast<float>(rank + 1);
      all_reduce(Buffer::of(v));
      if (v[3] != static_cast<float>(world * (world + 1) / 2)) {
        std::fprintf(stderr, "rank %d: step %d summed to %g\n", rank, step, v[3]);
        return 1;
      }
      if (step == 0 && rank == 0) {
        std::printf("rank 0 step 1\n");
        std::fflush(stdout);
      }
    }
    // A look at the accounting after the last step: the monitor joins
    // within COHORT_STRAGGLER_INTERVAL_S.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    dump_traces("end of job");
    std::string report = default_group()->stragglers_json();
    for (char& c : report) {
      if (c == '\n') c = ' ';
    }
    std::printf("rank %d report %s\n", rank, report.c_str());
    barrier();
    destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "straggler_worker: %s\n", e.what());
    return 1;
  }
}
