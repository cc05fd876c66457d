#include "reduce/reduce.h"

#include <algorithm>
#include <type_traits>

namespace cohort {
namespace {

// Wrapping arithmetic for signed integers: done in the unsigned type.
template <class T>
inline T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<T>(a + b);
  }
}

template <class T>
inline T wrap_mul(T a, T b) {
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
void reduce_native(ReduceOp::Kind op, T* __restrict d, const T* __restrict s, size_t n) {
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

void reduce_bool(ReduceOp::Kind op, uint8_t* __restrict d, const uint8_t* __restrict s, size_t n) {
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

// Half and bfloat16: widen a block to float32, reduce, narrow back.
template <class H>
void reduce_narrow(ReduceOp::Kind op, H* d, const H* s, size_t n) {
  constexpr size_t kBlock = 256;
  float a[kBlock], b[kBlock];
  for (size_t off = 0; off < n; off += kBlock) {
    size_t m = std::min(kBlock, n - off);
    for (size_t i = 0; i < m; ++i) {
      a[i] = static_cast<float>(d[off + i]);
      b[i] = static_cast<float>(s[off + i]);
    }
    reduce_native<float>(op, a, b, m);
    for (size_t i = 0; i < m; ++i) d[off + i] = H(a[i]);
  }
}

template <class T>
void scale_native(T* d, size_t n, double factor) {
  const T f = static_cast<T>(factor);
  for (size_t i = 0; i < n; ++i) d[i] = d[i] * f;
}

template <class H>
void scale_narrow(H* d, size_t n, double factor) {
  const float f = static_cast<float>(factor);
  for (size_t i = 0; i < n; ++i) d[i] = H(static_cast<float>(d[i]) * f);
}

}  // namespace

Status check_reduce_op(DType dtype, ReduceOp op) {
  const bool bitwise = op.kind == ReduceOp::BAND || op.kind == ReduceOp::BOR || op.kind == ReduceOp::BXOR;
  if (bitwise && is_floating(dtype)) {
    return invalid_argument(std::string("ReduceOp ") + reduce_op_name(op) + " is not defined for " +
                            dtype_name(dtype) + " (bitwise ops need an integer or bool dtype)");
  }
  const bool scaled = op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM;
  if (scaled && !is_floating(dtype)) {
    return invalid_argument(std::string("ReduceOp ") + reduce_op_name(op) + " is not defined for " +
                            dtype_name(dtype) + " (it needs a floating dtype; use SUM and divide)");
  }
  return Status::ok_status();
}

// Compiled for AVX-512, AVX2 and plain x86-64; the loader picks the best the
// CPU has (an ifunc), and the kernels above are inlined into each clone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COHORT_KERNEL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define COHORT_KERNEL_CLONES
#endif

COHORT_KERNEL_CLONES
void reduce_into(DType dtype, ReduceOp::Kind op, void* dst, const void* src, size_t n) {
  switch (dtype) {
    case DType::kFloat32:
      return reduce_native(op, static_cast<float*>(dst), static_cast<const float*>(src), n);
    case DType::kFloat64:
      return reduce_native(op, static_cast<double*>(dst), static_cast<const double*>(src), n);
    case DType::kFloat16:
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
    default:
      return;  // refused earlier by check_reduce_op
  }
}

}  // namespace cohort
