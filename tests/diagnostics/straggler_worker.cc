// straggler_worker: one rank of a job with (or without) a straggler, for
// the tests of the straggler accounting (docs/stragglers.md).
//
//   straggler_worker VICTIM STEPS SLEEP_MS [JOINED]
//
// env:// from the environment. Every rank runs STEPS all_reduces of four
// floats, checking each sum; rank VICTIM (-1: none) sleeps SLEEP_MS before
// each. Rank 0 says "rank 0 step 1" after the first. At the end every rank
// waits until its copy of the group's straggler summary has counted JOINED
// collectives (10 s at most; without JOINED, 1.5 s), writes its flight-recorder dump (with
// COHORT_TRACE_DIR), prints its accounting's report on one line ("rank R
// report {...}"), waits for the others (a barrier) and leaves. With
// STRAGGLER_FAIL_FIRST_ATTEMPT set the last rank exits 3 before the barrier
// in a launcher's first attempt (COHORT_RESTART_COUNT 0).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/process_group.h"
#include "common/json.h"
#include "diagnostics/group_monitor.h"

int main(int argc, char** argv) {
  using namespace cohort;
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: straggler_worker VICTIM STEPS SLEEP_MS [JOINED]\n");
    return 2;
  }
  const int joined = argc == 5 ? std::atoi(argv[4]) : -1;
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
    // Wait until this rank's copy of the group's summary has counted
    // `joined` collectives: rank 0 joins the ranks' times every
    // COHORT_STRAGGLER_INTERVAL_S, and the others read the summary back.
    std::string report;
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(joined < 0 ? 1500 : 10000);
    for (;;) {
      report = default_group()->stragglers_json();
      auto doc = Json::parse(report);
      if (joined >= 0 && doc.ok() && doc.value()["summary"]["collectives"].as_int() >= joined) break;
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    dump_traces("end of job");
    for (char& c : report) {
      if (c == '\n') c = ' ';
    }
    std::printf("rank %d report %s\n", rank, report.c_str());
    std::fflush(stdout);
    // For the launcher's test of a restart: the last rank fails the first
    // attempt here, after the summary is written.
    const char* attempt = std::getenv("COHORT_RESTART_COUNT");
    if (std::getenv("STRAGGLER_FAIL_FIRST_ATTEMPT") && attempt && std::string(attempt) == "0" &&
        rank == world - 1) {
      std::fprintf(stderr, "rank %d fails the first attempt on purpose\n", rank);
      return 3;
    }
    barrier();
    destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "straggler_worker: %s\n", e.what());
    return 1;
  }
}
