// types.h: the small value types of the communication API: dtypes, devices,
// buffer views and reduce operations.
//
// The core API works on Buffer, a view (pointer, element count, dtype,
// device) that does not own memory; the libtorch layer adapts at::Tensor to
// it. Names follow torch: ReduceOp::SUM, ReduceOp::premul_sum(2.0), ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace cohort {

// DType is an element type, with torch's names.
enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt16,
  kInt32,
  kInt64,
  kBool,
};

// dtype_size returns the bytes of one element (inline: it is asked for
// several times in every call).
inline size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
      return 2;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return 1;
  }
  return 1;
}

// dtype_name returns torch's name: "float32", "bfloat16", "bool", ...
const char* dtype_name(DType dtype);

// is_floating is true for float32/64, float16 and bfloat16.
bool is_floating(DType dtype);

// Half is an IEEE binary16 value (torch.float16), stored as its bits.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f);
  explicit operator float() const;
};

// BFloat16 is the upper half of a float32 (torch.bfloat16).
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f);
  explicit operator float() const;
};

// dtype_of<T>() is the DType of a C++ element type.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::kFloat16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::kBFloat16;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::kInt8;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kUInt8;
}
template <>
constexpr DType dtype_of<int16_t>() {
  return DType::kInt16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::kBool;
}

enum class DeviceType : uint8_t { kCPU, kCUDA };

// Device says where a buffer's memory lives.
struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
};

// Buffer is a view of `count` elements of `dtype` at `data`; it owns nothing.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  Device device{};

  size_t bytes() const { return count * dtype_size(dtype); }

  // of views `count` elements of T at `p`.
  template <class T>
  static Buffer of(T* p, size_t count) {
    return Buffer{static_cast<void*>(p), count, dtype_of<T>(), Device{}};
  }
  // of views a whole vector (std::vector<bool> is not contiguous: use uint8_t
  // storage with DType::kBool instead).
  template <class T>
  static Buffer of(std::vector<T>& v) {
    return of(v.data(), v.size());
  }
};

// ReduceOp is how all_reduce, reduce and reduce_scatter combine values.
// Write ReduceOp::SUM (and so on) or ReduceOp::premul_sum(factor).
struct ReduceOp {
  enum Kind : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM };

  constexpr ReduceOp(Kind k = SUM) : kind(k) {}  // NOLINT: implicit, as torch's
  // premul_sum multiplies each rank's input by `factor`, then sums.
  static ReduceOp premul_sum(double factor) {
    ReduceOp op(PREMUL_SUM);
    op.factor = factor;
    return op;
  }

  Kind kind;
  double factor = 1.0;  // PREMUL_SUM only
};

// reduce_op_name returns "SUM", "AVG", ...
const char* reduce_op_name(ReduceOp op);

}  // namespace cohort
