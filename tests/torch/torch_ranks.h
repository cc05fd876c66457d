// torch_ranks.h: ranks as threads for the libtorch layer's tests: the
// process group's run_group_ranks, with libtorch held to one thread per
// rank (the ranks share the machine's cores, as processes would).
#pragma once

#include <ATen/Parallel.h>

#include <functional>

#include "process_group/thread_ranks.h"

namespace cohort::testing {

inline void run_torch_ranks(int world_size, const std::function<void(const GroupPtr& group)>& body) {
  at::set_num_threads(1);
  run_group_ranks(world_size, body);
}

}  // namespace cohort::testing
