#include "reduce/reduce.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace cohort {
namespace {

// Every kernel is inlined into the clones of reduce_into and scale below:
// a kernel left out of line would be compiled once, for plain x86-64.
#define COHORT_KERNEL inline __attribute__((always_inline))

// Wrapping arithmetic for signed integers: done in the unsigned type.
template <class T>
COHORT_KERNEL T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<T>(a + b);
  }
}

template <class T>
COHORT_KERNEL T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    // Promote to unsigned int at least, so that uint16 * uint16 cannot
    // overflow a signed int on the way.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(
        static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(unsigned)) {
    return static_cast<T>(static_cast<unsigned>(a) * static_cast<unsigned>(b));
  } else {
    return static_cast<T>(a * b);
  }
}

// The loops below are written so that the compiler vectorises them.
template <class T>
COHORT_KERNEL void reduce_native(ReduceOp::Kind op, T* __restrict d, const T* __restrict s, size_t n) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
    case ReduceOp::PREMUL_SUM:
      for (size_t i = 0; i < n; ++i) d[i] = wrap_add(d[i], s[i]);
      return;
    case ReduceOp::PRODUCT:
      for (size_t i = 0; i < n; ++i) d[i] = wrap_mul(d[i], s[i]);
      return;
    case ReduceOp::MIN:
      for (size_t i = 0; i < n; ++i) d[i] = s[i] < d[i] ? s[i] : d[i];
      return;
    case ReduceOp::MAX:
      for (size_t i = 0; i < n; ++i) d[i] = s[i] > d[i] ? s[i] : d[i];
      return;
    case ReduceOp::BAND:
      if constexpr (std::is_integral_v<T>) {
        for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] & s[i]);
      }
      return;
    case ReduceOp::BOR:
      if constexpr (std::is_integral_v<T>) {
        for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] | s[i]);
      }
      return;
    case ReduceOp::BXOR:
      if constexpr (std::is_integral_v<T>) {
        for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] ^ s[i]);
      }
      return;
  }
}

COHORT_KERNEL void reduce_bool(ReduceOp::Kind op, uint8_t* __restrict d, const uint8_t* __restrict s,
                               size_t n) {
  switch (op) {
    case ReduceOp::PRODUCT:
    case ReduceOp::MIN:
    case ReduceOp::BAND:
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(d[i] & s[i]);
      return;
    case ReduceOp::BXOR:
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(d[i] ^ s[i]);
      return;
    default:  // SUM, MAX, BOR
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(d[i] | s[i]);
      return;
  }
}

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// bfloat16 <-> float32 inline and branch-free, so that the loops below
// vectorise (the same rounding as BFloat16: to nearest even, NaN kept).
COHORT_KERNEL float widen(BFloat16 h) {
  return float_of(static_cast<uint32_t>(h.bits) << 16);
}

COHORT_KERNEL BFloat16 narrow_bf16(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  BFloat16 out;
  out.bits = static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
  return out;
}

// float16 <-> float32, branch-free so that the loops vectorise (selects,
// not jumps), with Half's results: round to nearest even, subnormals kept,
// NaN quieted. The exponent is rebased by a float multiply or add, which
// also normalises subnormals exactly.
COHORT_KERNEL float widen(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t rest = static_cast<uint32_t>(h.bits & 0x7FFFu) << 13;
  const uint32_t finite = bits_of(float_of(rest) * 0x1p112f);
  const uint32_t special = rest | 0x7F800000u;                                            // inf or NaN
  const uint32_t is_special = 0u - static_cast<uint32_t>((h.bits & 0x7C00u) == 0x7C00u);  // all ones or 0
  return float_of(sign | (special & is_special) | (finite & ~is_special));
}

COHORT_KERNEL Half narrow_half(float f) {
  const uint32_t all = bits_of(f);
  const uint32_t sign = (all >> 16) & 0x8000u;
  const uint32_t u = all & 0x7FFFFFFFu;
  const uint32_t special = u > 0x7F800000u ? 0x7E00u : 0x7C00u;  // NaN or overflow
  constexpr uint32_t kDenormMagic = ((127 - 15) + (23 - 10) + 1) << 23;
  const uint32_t subnormal = bits_of(float_of(u) + float_of(kDenormMagic)) - kDenormMagic;
  const uint32_t normal = (u + ((15u - 127u) << 23) + 0xFFFu + ((u >> 13) & 1u)) >> 13;
  const uint32_t out = u >= (143u << 23) ? special : (u < (113u << 23) ? subnormal : normal);
  Half h;
  h.bits = static_cast<uint16_t>(out | sign);
  return h;
}

COHORT_KERNEL void widen_block(const Half* in, float* out, size_t m) {
  for (size_t i = 0; i < m; ++i) out[i] = widen(in[i]);
}
COHORT_KERNEL void narrow_block(const float* in, Half* out, size_t m) {
  for (size_t i = 0; i < m; ++i) out[i] = narrow_half(in[i]);
}

COHORT_KERNEL void widen_block(const BFloat16* in, float* out, size_t m) {
  for (size_t i = 0; i < m; ++i) out[i] = widen(in[i]);
}
COHORT_KERNEL void narrow_block(const float* in, BFloat16* out, size_t m) {
  for (size_t i = 0; i < m; ++i) out[i] = narrow_bf16(in[i]);
}

// Half and bfloat16: widen a block to float32 (on the stack: no
// allocation), reduce there, narrow back once.
template <class H>
COHORT_KERNEL void reduce_narrow(ReduceOp::Kind op, H* d, const H* s, size_t n) {
  constexpr size_t kBlock = 256;
  float a[kBlock], b[kBlock];
  for (size_t off = 0; off < n; off += kBlock) {
    size_t m = std::min(kBlock, n - off);
    widen_block(d + off, a, m);
    widen_block(s + off, b, m);
    reduce_native<float>(op, a, b, m);
    narrow_block(a, d + off, m);
  }
}

template <class T>
COHORT_KERNEL void scale_native(T* d, size_t n, double factor) {
  const T f = static_cast<T>(factor);
  for (size_t i = 0; i < n; ++i) d[i] = d[i] * f;
}

// divide_native is AVG's scaling on integers, as NCCL defines it: the sum
// divided by the group's size, truncated toward zero (C++'s integer
// division). `factor` is 1/size; its reciprocal rounds back to the size.
template <class T>
COHORT_KERNEL void divide_native(T* d, size_t n, double factor) {
  const T divisor = static_cast<T>(std::llround(1.0 / factor));
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] / divisor);
}

template <class H>
COHORT_KERNEL void scale_narrow(H* d, size_t n, double factor) {
  constexpr size_t kBlock = 256;
  const float f = static_cast<float>(factor);
  float a[kBlock];
  for (size_t off = 0; off < n; off += kBlock) {
    size_t m = std::min(kBlock, n - off);
    widen_block(d + off, a, m);
    for (size_t i = 0; i < m; ++i) a[i] *= f;
    narrow_block(a, d + off, m);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// float16 with F16C's conversion instructions, 8 at a time (where the CPU
// has them: has_f16c()); the branch-free path above is the fallback.
__attribute__((target("avx2,f16c"))) void reduce_half_f16c(ReduceOp::Kind op, Half* d, const Half* s,
                                                           size_t n) {
  constexpr size_t kBlock = 256;
  alignas(32) float a[kBlock], b[kBlock];
  for (size_t off = 0; off < n; off += kBlock) {
    const size_t m = std::min(kBlock, n - off);
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
      _mm256_store_ps(a + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + off + i))));
      _mm256_store_ps(b + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + off + i))));
    }
    for (; i < m; ++i) {
      a[i] = widen(d[off + i]);
      b[i] = widen(s[off + i]);
    }
    reduce_native<float>(op, a, b, m);
    i = 0;
    for (; i + 8 <= m; i += 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + off + i),
                       _mm256_cvtps_ph(_mm256_load_ps(a + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < m; ++i) d[off + i] = narrow_half(a[i]);
  }
}

bool has_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}
#endif

}  // namespace

Status check_reduce_op(DType dtype, ReduceOp op) {
  const bool bitwise = op.kind == ReduceOp::BAND || op.kind == ReduceOp::BOR || op.kind == ReduceOp::BXOR;
  if (bitwise && is_floating(dtype)) {
    return invalid_argument(std::string("ReduceOp ") + reduce_op_name(op) + " is not defined for " +
                            dtype_name(dtype) + " (bitwise ops need an integer or bool dtype)");
  }
  // AVG on integers is the sum divided by the size, truncated (NCCL's
  // definition, which torch's frameworks rely on); on bool it means nothing.
  if (op.kind == ReduceOp::AVG && dtype == DType::kBool) {
    return invalid_argument(std::string("ReduceOp AVG is not defined for ") + dtype_name(dtype) +
                            " (use MAX/BOR for any, MIN/BAND for all)");
  }
  if (op.kind == ReduceOp::PREMUL_SUM && !is_floating(dtype)) {
    return invalid_argument(std::string("ReduceOp ") + reduce_op_name(op) + " is not defined for " +
                            dtype_name(dtype) + " (it needs a floating dtype; use SUM and multiply)");
  }
  return Status::ok_status();
}

// Compiled for AVX-512 (x86-64-v4), AVX2 with F16C and FMA (x86-64-v3)
// and plain x86-64; the loader picks the best the CPU has (an ifunc), and
// the kernels above are inlined into each clone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COHORT_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define COHORT_KERNEL_CLONES
#endif

namespace {
// Any thread has a tally: checked first, so that the usual reduce_into
// pays one load of a global, not a thread-local lookup.
std::atomic<int> g_tallies{0};
thread_local ReduceTally* t_tally = nullptr;

// counted_in_tally: true when this thread's reduction was only counted.
bool counted_in_tally(DType dtype, size_t n) {
  if (__builtin_expect(g_tallies.load(std::memory_order_relaxed) == 0, 1) || t_tally == nullptr) return false;
  t_tally->bytes += n * dtype_size(dtype);
  return true;
}
}  // namespace

void set_reduce_tally(ReduceTally* tally) {
  if ((t_tally == nullptr) != (tally == nullptr)) g_tallies.fetch_add(tally ? 1 : -1);
  t_tally = tally;
}

COHORT_KERNEL_CLONES
void reduce_into(DType dtype, ReduceOp::Kind op, void* dst, const void* src, size_t n) {
  if (counted_in_tally(dtype, n)) return;
  switch (dtype) {
    case DType::kFloat32:
      return reduce_native(op, static_cast<float*>(dst), static_cast<const float*>(src), n);
    case DType::kFloat64:
      return reduce_native(op, static_cast<double*>(dst), static_cast<const double*>(src), n);
    case DType::kFloat16:
#if defined(__x86_64__) && defined(__GNUC__)
      if (has_f16c()) return reduce_half_f16c(op, static_cast<Half*>(dst), static_cast<const Half*>(src), n);
#endif
      return reduce_narrow(op, static_cast<Half*>(dst), static_cast<const Half*>(src), n);
    case DType::kBFloat16:
      return reduce_narrow(op, static_cast<BFloat16*>(dst), static_cast<const BFloat16*>(src), n);
    case DType::kInt8:
      return reduce_native(op, static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), n);
    case DType::kUInt8:
      return reduce_native(op, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n);
    case DType::kInt16:
      return reduce_native(op, static_cast<int16_t*>(dst), static_cast<const int16_t*>(src), n);
    case DType::kInt32:
      return reduce_native(op, static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n);
    case DType::kInt64:
      return reduce_native(op, static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n);
    case DType::kBool:
      return reduce_bool(op, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n);
  }
}

COHORT_KERNEL_CLONES
void scale(DType dtype, void* data, size_t n, double factor) {
  switch (dtype) {
    case DType::kFloat32:
      return scale_native(static_cast<float*>(data), n, factor);
    case DType::kFloat64:
      return scale_native(static_cast<double*>(data), n, factor);
    case DType::kFloat16:
      return scale_narrow(static_cast<Half*>(data), n, factor);
    case DType::kBFloat16:
      return scale_narrow(static_cast<BFloat16*>(data), n, factor);
    case DType::kInt8:
      return divide_native(static_cast<int8_t*>(data), n, factor);
    case DType::kUInt8:
      return divide_native(static_cast<uint8_t*>(data), n, factor);
    case DType::kInt16:
      return divide_native(static_cast<int16_t*>(data), n, factor);
    case DType::kInt32:
      return divide_native(static_cast<int32_t*>(data), n, factor);
    case DType::kInt64:
      return divide_native(static_cast<int64_t*>(data), n, factor);
    case DType::kBool:
      return;  // refused earlier by check_reduce_op
  }
}

}  // namespace cohort
