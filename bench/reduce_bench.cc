// reduce_bench: the reduction kernels (src/reduce) per dtype and op, in
// bytes of the accumulator processed per second, on blocks that stay in
// cache (256 KiB) and blocks that do not (64 MiB). Google Benchmark:
//   build/bench/reduce_bench [--benchmark_filter=float16]
#include <benchmark/benchmark.h>

#include <vector>

#include "reduce/reduce.h"

namespace {

void BM_reduce(benchmark::State& state, cohort::DType dtype, cohort::ReduceOp::Kind op) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t n = bytes / cohort::dtype_size(dtype);
  std::vector<uint8_t> dst(bytes, 0x3c), src(bytes, 0x3c);  // small finite values in every dtype
  for (auto _ : state) {
    cohort::reduce_into(dtype, op, dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

using cohort::DType;
using cohort::ReduceOp;
#define COHORT_REDUCE_BENCH(name, dtype, op) \
  BENCHMARK_CAPTURE(BM_reduce, name, dtype, op)->Arg(256 << 10)->Arg(64 << 20)

COHORT_REDUCE_BENCH(float32_sum, DType::kFloat32, ReduceOp::SUM);
COHORT_REDUCE_BENCH(float32_max, DType::kFloat32, ReduceOp::MAX);
COHORT_REDUCE_BENCH(float64_sum, DType::kFloat64, ReduceOp::SUM);
COHORT_REDUCE_BENCH(float16_sum, DType::kFloat16, ReduceOp::SUM);
COHORT_REDUCE_BENCH(bfloat16_sum, DType::kBFloat16, ReduceOp::SUM);
COHORT_REDUCE_BENCH(int8_sum, DType::kInt8, ReduceOp::SUM);
COHORT_REDUCE_BENCH(int32_product, DType::kInt32, ReduceOp::PRODUCT);
COHORT_REDUCE_BENCH(int64_bxor, DType::kInt64, ReduceOp::BXOR);
COHORT_REDUCE_BENCH(bool_max, DType::kBool, ReduceOp::MAX);

}  // namespace

BENCHMARK_MAIN();
