// fsdp_net.h: the small network the FSDP and DCP workers shard: 7 -> 10
// -> 3, each Linear a unit and the root last. Ten rows over 3 ranks are
// 4, 4, 2; three over 4 ranks are 1, 1, 1, 0 (an empty shard).
#pragma once

#include <torch/torch.h>

#include <memory>

#include "cohort/fsdp.h"

namespace cohort::testing {

using Unit = std::shared_ptr<FullyShardImpl<torch::nn::Linear>>;
using Root = std::shared_ptr<FullyShardImpl<torch::nn::Sequential>>;

struct Sharded {
  Unit first, second;
  Root root;
};

// sharded_net builds it from `seed`, one layer a statement: each draws
// from the generator, in this order (a call's arguments are built in the
// compiler's order).
inline Sharded sharded_net(const FullyShardOptions& options, int seed = 0) {
  torch::manual_seed(seed);
  Sharded s;
  s.first = fully_shard(torch::nn::Linear(7, 10), options);
  s.second = fully_shard(torch::nn::Linear(10, 3), options);
  s.root = fully_shard(torch::nn::Sequential(s.first, torch::nn::ReLU(), s.second), options);
  return s;
}

}  // namespace cohort::testing
