// trace_bench: what the flight recorder adds to an operation that runs on
// the caller's thread (Google Benchmark, CPU time, so that other processes
// on a busy machine do not count):
//   build/bench/trace_bench
// BM_recorder: one collective's recording alone (began + finish: a lock
// and a counter read each), with the default ring and without one. BM_all_reduce_world_one: a whole
// blocking all_reduce of one float on a group of one rank (the caller's
// thread path without any peer to wait for), with the ring and without.
// BM_accounting_tick: one tick of the straggler accounting on the monitor
// thread (docs/stragglers.md) at rank 0 of a 2-rank group over a HashStore,
// after Arg new collectives: take them from the ring, publish this rank's
// record, read the other's and join; what it costs a core each
// COHORT_STRAGGLER_INTERVAL_S.
#include <benchmark/benchmark.h>

#include <memory>

#include "cohort/config.h"
#include "cohort/distributed.h"
#include "cohort/hash_store.h"
#include "diagnostics/group_trace.h"

namespace {

using namespace cohort;

void BM_recorder(benchmark::State& state) {
  GroupTrace trace("bench", 0, {0, 1}, "cohort", nullptr, static_cast<size_t>(state.range(0)));
  float x = 1;
  const OpShape shape = shape_of(Buffer::of(&x, 1));
  const std::string op = "all_reduce";
  uint64_t sequence = 0;
  for (auto _ : state) {
    TraceTicket t = trace.recorder().began(op, shape, ++sequence);
    trace.finish(t, nullptr);
  }
}
BENCHMARK(BM_recorder)->Arg(2000)->Arg(0)->ArgName("ring");

void BM_all_reduce_world_one(benchmark::State& state) {
  set_config("COHORT_TRACE_BUFFER_ENTRIES", std::to_string(state.range(0)));
  auto group =
      make_group(std::make_shared<HashStore>(), 0, 1, std::chrono::seconds(60), "bench", "", "cohort");
  float x = 1;
  for (auto _ : state) group->all_reduce(Buffer::of(&x, 1));
  reset_config("COHORT_TRACE_BUFFER_ENTRIES");
}
BENCHMARK(BM_all_reduce_world_one)->Arg(2000)->Arg(0)->ArgName("ring");

void BM_accounting_tick(benchmark::State& state) {
  auto store = std::make_shared<HashStore>();
  GroupTrace rank0("bench", 0, {0, 1}, "cohort", store, 2000);
  GroupTrace rank1("bench", 1, {0, 1}, "cohort", store, 2000);
  float x = 1;
  const OpShape shape = shape_of(Buffer::of(&x, 1));
  uint64_t sequence = 0;
  int64_t now = trace_clock_ns();
  for (auto _ : state) {
    state.PauseTiming();
    for (int64_t i = 0; i < state.range(0); ++i) {
      ++sequence;
      for (GroupTrace* t : {&rank0, &rank1})
        t->finish(t->recorder().began("all_reduce", shape, sequence), nullptr);
    }
    now += 1000000000;
    rank1.arrivals().tick(rank1, now);
    state.ResumeTiming();
    rank0.arrivals().tick(rank0, now);
  }
}
BENCHMARK(BM_accounting_tick)->Arg(1)->Arg(64)->Arg(256)->ArgName("new");

}  // namespace

BENCHMARK_MAIN();
