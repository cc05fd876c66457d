// pg_worker: one rank of a multi-process process-group test.
//
//   pg_worker MODE INIT_METHOD [VICTIM]
//
// RANK and WORLD_SIZE (and MASTER_ADDR/PORT for env://) come from the
// environment. Modes:
//   allreduce  all_reduce, check the sum, new_group of the even ranks, barrier
//   die        rank VICTIM exits after joining; the others must get
//              NetworkError naming it
//   silent     rank VICTIM stops answering; the others must get TimeoutError
//              naming the operation, group and sequence number
//   loop       every rank runs all_reduce after all_reduce until one fails;
//              the test kills a rank meanwhile, and the others must get
//              NetworkError (not their 60 s timeout)
//   stale      makes a shared-memory segment and dies without removing it,
//              as a crashed run would (no init, no rank)
//   big        like loop with 64 MiB all_reduces (the test kills a rank,
//              SIGKILL, or stops it, SIGSTOP, with a 3 s op timeout): a
//              survivor prints when (wall clock, ns) and what it caught, and
//              that the next operation fails at once too; in symmetric
//              memory with PG_WORKER_SYMMETRIC=1
//   symmetric  all_reduces in symmetric memory (each rank its own mapping):
//              the same offset everywhere, offsets that differ by rank,
//              rank 0 in ordinary memory, and coalesced pieces; checks each
//   shrink     like loop; after the NetworkError the survivors shrink the
//              default group and check an all_reduce among themselves
//   store      ranks other than 0 wait on a store key that never comes; the
//              test kills rank 0, which hosts the store: StoreError
//   desync     rank 1 calls broadcast where the others call all_reduce; run
//              with COHORT_DEBUG=detail, every rank must get DesyncError
//   late       four all_reduces of 4 MiB, then rank VICTIM says "idle" and
//              waits to be killed instead of calling the fifth; the others'
//              fifth fails after 3 s (with COHORT_TRACE_DIR they dump)
//   stall      rank VICTIM sleeps 3 s before the second all_reduce; the
//              others wait for it (with a short COHORT_STALL_WARN_S they
//              warn meanwhile) and it completes
//   pingpong   ranks 0 and 1 bounce a counter with blocking send and recv
//              (run on the caller's thread), checking it every time, until
//              one fails; the test kills rank 1 meanwhile (rank 0 must get
//              NetworkError), or rank VICTIM stops answering after the
//              first 100 (the other must get TimeoutError after 3 s)
// "ready" lines say a rank finished its first operation.
// Prints "rank R ok: ..." and exits 0 when the rank saw what it should.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/errors.h"
#include "common/shm_segment.h"

using namespace cohort;

namespace {

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void say_ready(int rank) {
  std::printf("rank %d ready\n", rank);
  std::fflush(stdout);
}

// caught prints "rank R ok: CLASS at NS: message" for the test to time.
void caught(int rank, const char* what, const Error& e, long long at) {
  std::printf("rank %d ok: %s at %lld: %s\n", rank, what, at, e.what());
  std::fflush(stdout);
}

// ping_pong_rank runs mode pingpong (see above) on a group of 2.
int ping_pong_rank(int rank, int victim) {
  const int peer = 1 - rank;
  P2POptions options;
  options.timeout = std::chrono::seconds(3);
  // Rank 0 sends 0, 2, 4, ... and rank 1 answers each with its successor;
  // both check every value they get.
  int64_t value = 0;
  auto round = [&] {
    int64_t got = -1, want = value;
    if (rank == 0) {
      default_group()->send(Buffer::of(&value, 1), peer, options);
      default_group()->recv(Buffer::of(&got, 1), peer, options);
      want = value + 1;
    } else {
      default_group()->recv(Buffer::of(&got, 1), peer, options);
      int64_t answer = got + 1;
      default_group()->send(Buffer::of(&answer, 1), peer, options);
    }
    if (got != want) {
      std::printf("rank %d wrong: got %lld, expected %lld\n", rank, static_cast<long long>(got),
                  static_cast<long long>(want));
      std::exit(1);
    }
    value += 2;
  };
  for (int i = 0; i < 100; ++i) round();
  say_ready(rank);
  if (rank == victim) raise(SIGSTOP);  // silent: alive but never answers
  try {
    for (;;) round();
  } catch (const NetworkError& e) {
    caught(rank, "NetworkError", e, wall_ns());
  } catch (const TimeoutError& e) {
    caught(rank, "TimeoutError", e, wall_ns());
  }
  return 0;
}

// late_rank runs modes late and stall (see above).
int late_rank(const std::string& mode, int rank, int victim) {
  std::vector<float> v(mode == "late" ? 1 << 20 : 1, 1.0f);
  const int before = mode == "late" ? 4 : 1;
  for (int i = 0; i < before; ++i) all_reduce(Buffer::of(v));
  if (rank == victim && mode == "late") {
    std::printf("rank %d idle\n", rank);
    std::fflush(stdout);
    for (;;) pause();  // a signal's handler may wake it; it waits on
  }
  if (rank == victim) sleep(3);
  AllReduceOptions options;
  if (mode == "late") options.timeout = std::chrono::seconds(3);
  try {
    all_reduce(Buffer::of(v), options);
  } catch (const Error& e) {
    std::printf("rank %d ok: %s\n", rank, e.what());
    return mode == "late" ? 0 : 1;
  }
  std::printf("rank %d %s: all_reduce #%d completed\n", rank, mode == "stall" ? "ok" : "wrong", before + 1);
  return mode == "stall" ? 0 : 1;
}

// symmetric_rank is the symmetric mode: each case fills the rank's values,
// all_reduces them and checks the sums.
int symmetric_rank(int rank, int world) {
  constexpr size_t kCount = 300001;  // over a slot (several chunks), odd
  auto value = [](int r, size_t i) { return static_cast<float>((r * 5 + i * 3) % 17); };
  auto block = default_group()->alloc_symmetric((2 * kCount + 8192) * sizeof(float));
  if (!block->shared()) {
    std::printf("rank %d wrong: the block is not shared\n", rank);
    return 1;
  }
  std::vector<float> ordinary(kCount);
  auto check = [&](const std::vector<Buffer>& pieces, const char* what) {
    size_t i = 0;
    for (const Buffer& b : pieces) {
      for (size_t k = 0; k < b.count; ++k, ++i) static_cast<float*>(b.data)[k] = value(rank, i);
    }
    if (pieces.size() == 1) {
      all_reduce(pieces.front());
    } else {
      default_group()->all_reduce_coalesced(pieces);
    }
    i = 0;
    for (const Buffer& b : pieces) {
      for (size_t k = 0; k < b.count; ++k, ++i) {
        float want = 0;
        for (int q = 0; q < world; ++q) want += value(q, i);
        if (static_cast<float*>(b.data)[k] != want) {
          std::printf("rank %d wrong: %s [%zu] = %g, expected %g\n", rank, what, i,
                      static_cast<double>(static_cast<float*>(b.data)[k]), static_cast<double>(want));
          return false;
        }
      }
    }
    return true;
  };
  const size_t shift = static_cast<size_t>(rank) * 1000;
  const size_t cut = 5000 + static_cast<size_t>(rank) * 50000;
  const bool ok =
      check({block->buffer(DType::kFloat32, kCount)}, "same offset") &&
      check({block->buffer(DType::kFloat32, kCount, shift * sizeof(float))}, "offsets differ by rank") &&
      check({rank == 0 ? Buffer::of(ordinary) : block->buffer(DType::kFloat32, kCount)}, "rank 0 ordinary") &&
      check({block->buffer(DType::kFloat32, cut),
             block->buffer(DType::kFloat32, kCount - cut, (kCount + 4096) * sizeof(float))},
            "pieces");
  if (!ok) return 1;
  destroy_process_group();
  std::printf("rank %d ok: symmetric all_reduces match\n", rank);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[1];
  const int victim = argc > 3 ? std::atoi(argv[3]) : -1;
  if (mode == "stale") {
    auto segment = ShmSegment::create(1 << 20);
    if (!segment.ok()) return 1;
    std::printf("%s\n", segment.value().name().c_str());
    std::fflush(stdout);
    _exit(0);  // no unlink: the name stays in /dev/shm
  }
  InitOptions init;
  init.init_method = argv[2];
  init.timeout = std::chrono::seconds(60);
  if (mode != "env") {
    // tcp:// and file:// take rank and size from the environment here too.
    init.rank = std::atoi(std::getenv("RANK"));
    init.world_size = std::atoi(std::getenv("WORLD_SIZE"));
  }
  try {
    init_process_group(init);
    const int rank = get_rank(), world = get_world_size();
    if (mode == "allreduce") {
      std::vector<int64_t> v(1000, rank + 1);
      all_reduce(Buffer::of(v));
      if (v[999] != static_cast<int64_t>(world) * (world + 1) / 2) {
        std::fprintf(stderr, "rank %d: sum %lld\n", rank, static_cast<long long>(v[999]));
        return 1;
      }
      std::vector<int> evens;
      for (int r = 0; r < world; r += 2) evens.push_back(r);
      auto group = new_group(evens);
      if ((rank % 2 == 0) != group->is_member()) return 1;
      // Every rank calls, as torch programs do: odd ranks' calls do nothing.
      int32_t x = rank;
      all_reduce(Buffer::of(&x, 1), {}, group);
      int32_t want = rank;
      if (group->is_member()) {
        want = 0;
        for (int r : evens) want += r;
      }
      if (x != want) return 1;
      barrier();
      destroy_process_group();
      std::printf("rank %d ok: sum %lld\n", rank, static_cast<long long>(v[999]));
      return 0;
    }
    if (mode == "loop") {
      std::printf("rank %d ready\n", rank);
      std::fflush(stdout);
      std::vector<float> v(1 << 18, 1.0f);
      try {
        for (;;) all_reduce(Buffer::of(v));
      } catch (const NetworkError& e) {
        std::printf("rank %d ok: NetworkError: %s\n", rank, e.what());
        return 0;
      }
    }
    if (mode == "symmetric") return symmetric_rank(rank, world);
    if (mode == "big") {
      // 64 MiB (PG_WORKER_BIG_FLOATS floats if set), in symmetric memory
      // with PG_WORKER_SYMMETRIC=1.
      const char* floats_env = std::getenv("PG_WORKER_BIG_FLOATS");
      const size_t floats = floats_env ? std::strtoull(floats_env, nullptr, 10) : size_t{16} << 20;
      std::vector<float> ordinary;
      std::shared_ptr<SymmetricMemory> block;
      Buffer buffer;
      if (std::getenv("PG_WORKER_SYMMETRIC")) {
        block = default_group()->alloc_symmetric(floats * sizeof(float));
        buffer = block->buffer(DType::kFloat32, floats);
        std::fill_n(static_cast<float*>(buffer.data), buffer.count, 1.0f);
      } else {
        ordinary.assign(floats, 1.0f);
        buffer = Buffer::of(ordinary);
      }
      Buffer v = buffer;
      AllReduceOptions options;
      const char* timeout_s = std::getenv("PG_WORKER_OP_TIMEOUT_S");  // the test's (sanitizers: longer)
      options.timeout = std::chrono::seconds(timeout_s ? std::atoi(timeout_s) : 3);
      all_reduce(v, options);
      say_ready(rank);
      try {
        for (;;) all_reduce(v, options);
      } catch (const NetworkError& e) {
        caught(rank, "NetworkError", e, wall_ns());
      } catch (const TimeoutError& e) {
        caught(rank, "TimeoutError", e, wall_ns());
      }
      // Later operations fail at once, with the same cause.
      const long long before = wall_ns();
      try {
        all_reduce(v, options);
        return 1;
      } catch (const Error& e) {
        std::printf("rank %d next operation failed after %lld us: %s\n", rank, (wall_ns() - before) / 1000,
                    e.what());
      }
      return 0;
    }
    if (mode == "shrink") {
      std::vector<float> v(1 << 16, 1.0f);
      all_reduce(Buffer::of(v));
      say_ready(rank);
      try {
        for (;;) all_reduce(Buffer::of(v));
      } catch (const NetworkError& e) {
        caught(rank, "NetworkError", e, wall_ns());
      }
      const int old_rank = rank;
      std::string suspects;
      for (int r : default_group()->lost_ranks())
        suspects += (suspects.empty() ? "" : ",") + std::to_string(r);
      std::printf("rank %d suspects [%s]\n", rank, suspects.c_str());
      auto shrunk = shrink_group();
      int64_t x = old_rank + 1;  // the survivors' ranks, plus one, summed
      all_reduce(Buffer::of(&x, 1));
      std::printf("rank %d ok: shrunk to rank %d of %d (default group: rank %d of %d), sum %lld\n", old_rank,
                  shrunk->rank(), shrunk->size(), get_rank(), get_world_size(), static_cast<long long>(x));
      destroy_process_group();
      return 0;
    }
    if (mode == "store") {
      say_ready(rank);
      if (rank == 0) {
        for (;;) pause();  // hosts the store until killed
      }
      try {
        default_group()->store()->wait({"never-set"}, std::chrono::seconds(60));
        return 1;
      } catch (const StoreError& e) {
        caught(rank, "StoreError", e, wall_ns());
      }
      return 0;
    }
    if (mode == "skip") {
      // Rank 1 skips the all_reduce rank 0 makes, and ends its job.
      std::vector<float> v(1000, 1.0f);
      if (rank == 0) {
        try {
          all_reduce(Buffer::of(v));
        } catch (const DesyncError& e) {
          std::printf("rank 0 ok: DesyncError: %s\n", e.what());
          return 0;
        }
        std::fprintf(stderr, "rank 0: all_reduce ran without rank 1\n");
        return 1;
      }
      try {
        destroy_process_group();
      } catch (const DesyncError& e) {
        std::printf("rank 1 ok: DesyncError: %s\n", e.what());
        return 0;
      }
      std::fprintf(stderr, "rank 1 wrong: it skipped a collective and destroy_process_group said nothing\n");
      return 1;
    }
    if (mode == "desync") {
      std::vector<float> v(1000, 1.0f);
      try {
        if (rank == 1) {
          broadcast(Buffer::of(v));
        } else {
          all_reduce(Buffer::of(v));
        }
      } catch (const DesyncError& e) {
        std::printf("rank %d ok: DesyncError: %s\n", rank, e.what());
        return 0;
      }
      std::fprintf(stderr, "rank %d: the mismatched collective ran\n", rank);
      return 1;
    }
    if (mode == "late" || mode == "stall") return late_rank(mode, rank, victim);
    if (mode == "pingpong") return ping_pong_rank(rank, victim);
    if (rank == victim) {
      if (mode == "die") _exit(7);
      raise(SIGSTOP);  // silent: alive but never answers
    }
    std::vector<float> v(1 << 16, 1.0f);
    AllReduceOptions options;
    options.timeout = std::chrono::seconds(3);  // the operation's own timeout
    try {
      all_reduce(Buffer::of(v), options);
      std::fprintf(stderr, "rank %d: all_reduce succeeded without rank %d\n", rank, victim);
      return 1;
    } catch (const NetworkError& e) {
      std::printf("rank %d ok: NetworkError: %s\n", rank, e.what());
      return mode == "die" ? 0 : 1;
    } catch (const TimeoutError& e) {
      std::printf("rank %d ok: TimeoutError: %s\n", rank, e.what());
      return mode == "silent" ? 0 : 1;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "rank ?: %s\n", e.what());
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
