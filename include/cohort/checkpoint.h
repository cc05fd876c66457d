// checkpoint.h: saving and resuming a distributed training run.
//
// Rank 0 writes the model's parameters and buffers, the optimizer's state
// and a step counter to one file, through a temporary file in the same
// directory that is renamed over the old checkpoint: a crash while saving
// leaves the previous checkpoint whole. Every rank then loads the same file,
// so a resumed run continues exactly where the saved one was.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>

#include "cohort/distributed.h"

namespace cohort {

// save_checkpoint: rank 0 of `group` (default: the default group) writes;
// every rank returns once the file is in place. Throws Error naming the
// path when it cannot be written.
void save_checkpoint(const std::string& path, const torch::nn::Module& module,
                     const torch::optim::Optimizer& optimizer, int64_t step, const GroupPtr& group = nullptr);

// load_checkpoint reads `path` into module and optimizer and returns the
// step saved with them. Throws InvalidArgument naming the path when it is
// missing or is not a cohort checkpoint.
int64_t load_checkpoint(const std::string& path, torch::nn::Module& module,
                        torch::optim::Optimizer& optimizer);

}  // namespace cohort
