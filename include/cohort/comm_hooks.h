// comm_hooks.h: DDP communication hooks, as torch's
// torch.distributed.algorithms.ddp_comm_hooks.
//
//   ddp.register_comm_hook(cohort::fp16_compress_hook());
//   cohort::PowerSGDOptions p;  p.matrix_approximation_rank = 2;
//   ddp.register_comm_hook(cohort::powersgd_hook(p));
//
// A hook gets a GradBucket (this rank's gradients, not yet averaged) and
// returns a future of the averaged bucket.
#pragma once

#include <cstdint>

#include "cohort/ddp.h"

namespace cohort {

// future_of returns a future completed with `result` (or the error) when
// `work` completes: the bridge from cohort's Work to a hook's future.
c10::intrusive_ptr<c10::ivalue::Future> future_of(const std::shared_ptr<Work>& work,
                                                  const at::Tensor& result);

// allreduce_hook: the average, in the bucket's dtype (DDP's default).
CommHook allreduce_hook();
// fp16_compress_hook / bf16_compress_hook: the bucket is divided by the
// world size, cast to float16 / bfloat16, summed, and cast back: half the
// bytes, at that dtype's precision.
CommHook fp16_compress_hook();
CommHook bf16_compress_hook();

// PowerSGDOptions are torch's PowerSGDState arguments.
struct PowerSGDOptions {
  int matrix_approximation_rank = 1;
  // Plain all_reduce for the first iterations (torch's default 1000; small
  // values suit tests).
  int64_t start_powerSGD_iter = 1000;
  // A matrix is compressed only when that saves at least this factor.
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0;
  uint64_t random_seed = 0;
};

// powersgd_hook: rank-r compression of each gradient matrix (Vogels et
// al., 2019), with error feedback and warm start, as torch's powerSGD_hook;
// vectors (biases) are all_reduced uncompressed. Its two all_reduces per
// bucket run in the hook, one after the other, so that every rank issues
// them in the same order; the hook returns a completed future.
CommHook powersgd_hook(PowerSGDOptions options = {});

}  // namespace cohort
