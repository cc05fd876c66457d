// torch_ranks.h: ranks as threads for the libtorch layer's tests: each
// thread gets its own group (real loopback connections, shared memory) and
// runs the body; the first failure is reported with its rank.
#pragma once

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/hash_store.h"

namespace cohort::testing {

inline void run_torch_ranks(int world_size, const std::function<void(const GroupPtr& group)>& body) {
  at::set_num_threads(1);
  auto store = std::make_shared<HashStore>();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto group = make_group(store, r, world_size, std::chrono::seconds(60), "torch");
        body(group);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world_size; ++r)
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r << " failed";
}

}  // namespace cohort::testing
