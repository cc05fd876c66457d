// rpc_bench: cohort's RPC (cohort/rpc.h) between two workers, as
// bench/python/rpc_bench.py measures torch's (TensorPipe). Run under
// cohortrun with 2 processes (env://); worker 0 calls, worker 1 answers.
// Prints, from worker 0, medians over REPS rounds:
//   rpc_bench cohort noop_us=.. echo4k_us=.. echo1m_us=.. echo16m_us=..
//   echo1m_gbps=.. echo16m_gbps=.. async_calls_per_s=..
// noop: one rpc_sync of a function that takes and returns nothing;
// echoK: an rpc_sync that sends a float tensor of K bytes and gets it back
// (GB/s counts both ways); async: ASYNC rpc_async no-ops started at once,
// then every future waited on.
//
//   rpc_bench [--reps R] [--async N]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cohort/rpc.h"

using namespace cohort::rpc;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// per_call_us times `calls` calls of `f` after `warm` untimed ones; the
// median of `reps` such rounds.
template <class F>
double per_call_us(int reps, int calls, F&& f) {
  for (int i = 0; i < std::max(1, calls / 10); ++i) f();
  std::vector<double> rounds;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    rounds.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
  }
  return median(rounds);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5, async_calls = 20000;
  std::string only;  // one measure alone (for a profiler): noop, echo4k, echo1m, echo16m, async
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--reps") {
      reps = std::atoi(argv[i + 1]);
    } else if (flag == "--only") {
      only = argv[i + 1];
    } else if (flag == "--async") {
      async_calls = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "rpc_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  torch::set_num_threads(1);
  register_function("noop", [](const std::vector<IValue>&) { return IValue(); });
  register_function("echo", [](const std::vector<IValue>& a) { return a[0]; });
  const int rank = std::atoi(std::getenv("RANK"));
  init_rpc("worker" + std::to_string(rank));
  if (rank == 0) {
    auto wanted = [&](const char* name) { return only.empty() || only == name; };
    const double noop = wanted("noop") ? per_call_us(reps, 2000, [] { rpc_sync("worker1", "noop"); }) : 0;
    auto echo = [&](const char* name, int64_t bytes, int calls) {
      if (!wanted(name)) return 0.0;
      at::Tensor t = torch::rand({bytes / 4});
      return per_call_us(reps, calls, [&] { rpc_sync("worker1", "echo", {t}); });
    };
    const double e4k = echo("echo4k", 4 << 10, 1000), e1m = echo("echo1m", 1 << 20, 200),
                 e16m = echo("echo16m", 16 << 20, 20);
    std::vector<double> rates{0};
    if (wanted("async")) rates.clear();
    for (int r = 0; r < reps && wanted("async"); ++r) {
      std::vector<FuturePtr> futures;
      futures.reserve(static_cast<size_t>(async_calls));
      const auto t0 = Clock::now();
      for (int i = 0; i < async_calls; ++i) futures.push_back(rpc_async("worker1", "noop"));
      for (auto& f : futures) f->wait();
      rates.push_back(async_calls / std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf(
        "rpc_bench cohort noop_us=%.2f echo4k_us=%.2f echo1m_us=%.1f echo16m_us=%.0f echo1m_gbps=%.2f "
        "echo16m_gbps=%.2f async_calls_per_s=%.0f\n",
        noop, e4k, e1m, e16m, 2.0 * (1 << 20) / e1m / 1e3, 2.0 * (16 << 20) / e16m / 1e3, median(rates));
    std::fflush(stdout);
  }
  shutdown();
  return 0;
}
