// elements.h: reading and writing one element of a buffer of any dtype as a
// double (integers wrap when stored, as torch's do). For checks, tests and
// benchmarks, never for hot paths.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cohort/types.h"

namespace cohort {

inline double load_element(DType d, const void* p, size_t i) {
  switch (d) {
    case DType::kFloat32:
      return static_cast<const float*>(p)[i];
    case DType::kFloat64:
      return static_cast<const double*>(p)[i];
    case DType::kFloat16:
      return static_cast<float>(static_cast<const Half*>(p)[i]);
    case DType::kBFloat16:
      return static_cast<float>(static_cast<const BFloat16*>(p)[i]);
    case DType::kInt8:
      return static_cast<const int8_t*>(p)[i];
    case DType::kUInt8:
      return static_cast<const uint8_t*>(p)[i];
    case DType::kInt16:
      return static_cast<const int16_t*>(p)[i];
    case DType::kInt32:
      return static_cast<const int32_t*>(p)[i];
    case DType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kBool:
      return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

inline void store_element(DType d, void* p, size_t i, double v) {
  switch (d) {
    case DType::kFloat32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      return;
    case DType::kFloat64:
      static_cast<double*>(p)[i] = v;
      return;
    case DType::kFloat16:
      static_cast<Half*>(p)[i] = Half(static_cast<float>(v));
      return;
    case DType::kBFloat16:
      static_cast<BFloat16*>(p)[i] = BFloat16(static_cast<float>(v));
      return;
    case DType::kInt8:
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(static_cast<int64_t>(v));
      return;
    case DType::kUInt8:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(static_cast<int64_t>(v));
      return;
    case DType::kInt16:
      static_cast<int16_t*>(p)[i] = static_cast<int16_t>(static_cast<int64_t>(v));
      return;
    case DType::kInt32:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(static_cast<int64_t>(v));
      return;
    case DType::kInt64:
      static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      return;
    case DType::kBool:
      static_cast<uint8_t*>(p)[i] = v != 0 ? 1 : 0;
      return;
  }
}

}  // namespace cohort
