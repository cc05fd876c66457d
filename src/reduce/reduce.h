// reduce.h: element-wise reduction kernels, every dtype x op.
//
// reduce_into combines a received block into an accumulator: dst = op(dst,
// src). AVG and PREMUL_SUM reduce as SUM; the collective scales before or
// after (see docs/collectives.md). Integer sums and products wrap like
// two's-complement hardware (as torch's do); float16 and bfloat16 are
// computed in float32 and rounded back. Bool treats SUM/MAX/BOR as OR and
// PRODUCT/MIN/BAND as AND.
#pragma once

#include <cstddef>

#include "cohort/types.h"
#include "common/status.h"

namespace cohort {

// check_reduce_op fails with kInvalidArgument when `op` is not defined for
// `dtype`: bitwise ops on floating types, PREMUL_SUM on integers and bool,
// AVG on bool.
Status check_reduce_op(DType dtype, ReduceOp op);

// reduce_into sets dst[i] = op(dst[i], src[i]) for i < count.
void reduce_into(DType dtype, ReduceOp::Kind op, void* dst, const void* src, size_t count);

// ReduceTally: while one is set on a thread, reduce_into on that thread
// combines nothing and adds the bytes it would have read from `src` to
// `bytes`. The schedule tracer (algorithms/schedule_trace.h) runs an
// algorithm's real code for a rank without its data and prices the
// reductions it would do. Other threads reduce as always.
struct ReduceTally {
  size_t bytes = 0;
};
// set_reduce_tally: `tally` for this thread (null: reduce for real again).
void set_reduce_tally(ReduceTally* tally);

// scale multiplies every element by `factor`. Integers (AVG only, factor
// 1/size) are divided by the size instead, truncated toward zero, as
// NCCL's AVG does.
void scale(DType dtype, void* data, size_t count, double factor);

}  // namespace cohort
