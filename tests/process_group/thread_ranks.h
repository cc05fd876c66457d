// thread_ranks.h: ranks as threads in one process, for the big matrix.
//
// run_ranks starts `world_size` threads; each makes its group over one
// shared HashStore (real TCP connections over loopback) and runs `body`.
// `backend` is a name or per-device spec ("cpu:cohort,cuda:nccl").
// An exception in any rank fails the test with the rank's message.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/hash_store.h"
#include "common/cpu_binding.h"

namespace cohort::testing {

// run_group_ranks is run_ranks for bodies that keep the group's shared
// pointer (DistributedDataParallel holds one).
inline void run_group_ranks(int world_size, const std::function<void(const GroupPtr& group)>& body,
                            std::chrono::milliseconds timeout = std::chrono::seconds(60),
                            const std::string& backend = "cohort") {
  auto store = std::make_shared<HashStore>();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(make_group(store, r, world_size, timeout, "test", "", backend));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world_size; ++r) EXPECT_EQ(errors[r], "") << "rank " << r << " failed";
}

inline void run_ranks(int world_size, const std::function<void(ProcessGroup& group)>& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60),
                      const std::string& backend = "cohort") {
  run_group_ranks(
      world_size, [&](const GroupPtr& group) { body(*group); }, timeout, backend);
}

// run_ranks_on_one_cpu runs `world` ranks as threads that all share one
// CPU, so that their machine counts as crowded (the shared memory's host
// as oversubscribed, the algorithm table's ranks_per_cpu as `world`): the
// rank threads inherit this thread's affinity, which is given back
// afterwards, even when a check fails.
inline void run_ranks_on_one_cpu(int world, const std::function<void(ProcessGroup&)>& fn) {
  const std::vector<int> all = affinity_of_this_thread();
  ASSERT_TRUE(bind_this_thread({all.front()}));
  struct Unpin {
    const std::vector<int>& cpus;
    ~Unpin() { bind_this_thread(cpus); }
  } unpin{all};
  run_ranks(world, fn);
}

}  // namespace cohort::testing
