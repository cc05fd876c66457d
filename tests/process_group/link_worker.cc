// link_worker: one rank of the link-failure test (link_failure_test.sh).
//
//   link_worker STOP_FILE
//
// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from the environment
// (env://); LINK_WORKER_FLOATS sets the all_reduce's size (default 1 Mi
// floats, 4 MiB) and LINK_WORKER_TIMEOUT_S each operation's timeout.
//
// Every rank runs all_reduce after all_reduce, checking every element of
// every result, while the test takes a host's link down under them. After
// each all_reduce the ranks agree, through a second small all_reduce, on
// whether rank 0 has seen STOP_FILE, so that all stop after the same one.
// Prints "rank R ready" after the first, then either
//   "rank R ok: N all_reduces, every element right, longest round S s" (exit 0) or
//   "rank R failed after N all_reduces at T ns: KIND: MESSAGE"  (exit 3),
// T being the wall clock (CLOCK_REALTIME) when the error reached the rank.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/errors.h"

using namespace cohort;

namespace {

long long wall_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Rank r's element i in round n: small integers, so that float sums are
// exact and a misplaced or stale block shows as a wrong value.
float value(int rank, size_t i, long round) {
  return static_cast<float>((static_cast<long>(rank) * 7 + static_cast<long>(i % 1000) + round) % 97);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: link_worker STOP_FILE\n");
    return 2;
  }
  const std::string stop_file = argv[1];
  InitOptions init;
  init.init_method = "env://";
  init.timeout = std::chrono::seconds(60);
  long rounds = 0;
  int rank = -1;
  try {
    init_process_group(init);
    rank = get_rank();
    const int world = get_world_size();
    AllReduceOptions options;
    options.timeout = std::chrono::seconds(env_size("LINK_WORKER_TIMEOUT_S", 20));
    std::vector<float> v(env_size("LINK_WORKER_FLOATS", size_t{1} << 20));
    // The longest round shows the test that one spanned the outage.
    double longest_s = 0;
    for (;;) {
      for (size_t i = 0; i < v.size(); ++i) v[i] = value(rank, i, rounds);
      const auto start = std::chrono::steady_clock::now();
      all_reduce(Buffer::of(v), options);
      for (size_t i = 0; i < v.size(); ++i) {
        float want = 0;
        for (int q = 0; q < world; ++q) want += value(q, i, rounds);
        if (v[i] != want) {
          std::printf("rank %d wrong: round %ld element %zu is %g, expected %g\n", rank, rounds, i,
                      static_cast<double>(v[i]), static_cast<double>(want));
          return 1;
        }
      }
      ++rounds;
      if (rounds == 1) {
        std::printf("rank %d ready\n", rank);
        std::fflush(stdout);
      }
      int32_t stop = rank == 0 && access(stop_file.c_str(), F_OK) == 0 ? 1 : 0;
      all_reduce(Buffer::of(&stop, 1), options);
      // The round's two all_reduces: the outage may fall in either.
      longest_s = std::max(longest_s,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (stop) break;
    }
    destroy_process_group();
    std::printf("rank %d ok: %ld all_reduces, every element right, longest round %.2f s\n", rank, rounds,
                longest_s);
    return 0;
  } catch (const Error& e) {
    const long long at = wall_ns();
    const char* kind = dynamic_cast<const TimeoutError*>(&e)   ? "TimeoutError"
                       : dynamic_cast<const NetworkError*>(&e) ? "NetworkError"
                                                               : "Error";
    std::printf("rank %d failed after %ld all_reduces at %lld ns: %s: %s\n", rank, rounds, at, kind,
                e.what());
    std::fflush(stdout);
    _exit(3);  // as a job whose rank failed: no orderly shutdown across a dead link
  }
}
