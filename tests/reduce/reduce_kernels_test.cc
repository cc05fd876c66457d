// The vectorised float16/bfloat16 kernels against Half and BFloat16's own
// (scalar, obviously right) conversions: every float16 bit pattern, and a
// million random sums and scalings including subnormals, overflow to
// infinity and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "reduce/reduce.h"

namespace cohort {
namespace {

template <class H>
bool same(H a, H b) {
  const bool a_nan = std::isnan(static_cast<float>(a)), b_nan = std::isnan(static_cast<float>(b));
  return a_nan || b_nan ? a_nan == b_nan : a.bits == b.bits;
}

template <class H>
H of_bits(uint16_t b) {
  H h;
  h.bits = b;
  return h;
}

template <class H>
void every_pattern_survives_multiplying_by_one(DType dtype) {
  std::vector<H> d(65536), one(65536, H(1.0f));
  for (uint32_t b = 0; b < 65536; ++b) d[b] = of_bits<H>(static_cast<uint16_t>(b));
  reduce_into(dtype, ReduceOp::PRODUCT, d.data(), one.data(), d.size());
  for (uint32_t b = 0; b < 65536; ++b) {
    ASSERT_TRUE(same(d[b], of_bits<H>(static_cast<uint16_t>(b)))) << "bits " << b << " became " << d[b].bits;
  }
}

template <class H>
void random_sums_and_scales_match(DType dtype) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 65535);
  const size_t n = 1 << 20;
  std::vector<H> a(n), b(n), sum(n), scaled(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = of_bits<H>(static_cast<uint16_t>(bits(rng)));
    b[i] = of_bits<H>(static_cast<uint16_t>(bits(rng)));
  }
  sum = a;
  reduce_into(dtype, ReduceOp::SUM, sum.data(), b.data(), n);
  scaled = a;
  scale(dtype, scaled.data(), n, 0.3);
  for (size_t i = 0; i < n; ++i) {
    const H want_sum(static_cast<float>(a[i]) + static_cast<float>(b[i]));
    ASSERT_TRUE(same(sum[i], want_sum))
        << a[i].bits << " + " << b[i].bits << ": " << sum[i].bits << " != " << want_sum.bits;
    const H want_scaled(static_cast<float>(a[i]) * 0.3f);
    ASSERT_TRUE(same(scaled[i], want_scaled)) << a[i].bits << " * 0.3: " << scaled[i].bits;
  }
}

TEST(ReduceKernels, Float16EveryBitPattern) {
  every_pattern_survives_multiplying_by_one<Half>(DType::kFloat16);
}

TEST(ReduceKernels, BFloat16EveryBitPattern) {
  every_pattern_survives_multiplying_by_one<BFloat16>(DType::kBFloat16);
}

TEST(ReduceKernels, Float16SumsAndScalesRoundLikeHalf) {
  random_sums_and_scales_match<Half>(DType::kFloat16);
}

TEST(ReduceKernels, BFloat16SumsAndScalesRoundLikeBFloat16) {
  random_sums_and_scales_match<BFloat16>(DType::kBFloat16);
}

}  // namespace
}  // namespace cohort
