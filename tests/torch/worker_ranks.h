// worker_ranks.h: ranks as processes for the libtorch layer's tests: a
// worker program started `world` times, joined by env:// on a free port.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/ports.h"
#include "support/subprocess.h"

namespace cohort::testing {

// start_ranks runs `argv` as `world` ranks (with `env` added to each
// one's environment); returns each one's output after checking that it
// exited with its code in `codes` (default: every rank 0; 128 + n for a
// rank killed by signal n).
inline std::vector<std::string> start_ranks(int world, const std::vector<std::string>& argv,
                                            const std::vector<std::string>& env = {},
                                            const std::vector<int>& codes = {}) {
  const uint16_t port = free_port();
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> vars{"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                  "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
                                  "OMP_NUM_THREADS=1"};
    vars.insert(vars.end(), env.begin(), env.end());
    ranks.push_back(std::make_unique<Subprocess>(argv, vars));
  }
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) {
    out.push_back(ranks[r]->read_all(std::chrono::seconds(120)));
    EXPECT_EQ(ranks[r]->wait(), codes.empty() ? 0 : codes[static_cast<size_t>(r)]) << out.back();
  }
  return out;
}

}  // namespace cohort::testing
