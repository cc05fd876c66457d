// reference.h: values each rank contributes, and the results computed
// locally, independently of cohort's kernels, to check collectives against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cohort/types.h"
#include "common/elements.h"

namespace cohort::testing {

// Values are small integers, so that sums and products are exact in every
// floating dtype (bfloat16 holds integers up to 256 exactly).
inline double contribution(DType dtype, ReduceOp op, int rank, size_t i) {
  if (dtype == DType::kBool) return static_cast<double>((rank + i) % 2);
  switch (op.kind) {
    case ReduceOp::PRODUCT:
      return static_cast<double>(1 + (rank + i) % 2);
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      return static_cast<double>((rank * 37 + i * 11) & 0x7F);
    case ReduceOp::MIN:
    case ReduceOp::MAX:
      return static_cast<double>((rank * 7 + i * 3) % 23);
    default:
      return static_cast<double>((rank + i) % 4);
  }
}

// contribution_period is the period in i of contribution() for every rank:
// the moduli above (i * 11 & 0x7F repeats every 128 since 11 is odd). The
// expected results repeat with it too, so the checks compute one period
// and copy it: element by element (a double and a dtype switch each, and
// expected() over every rank) the reference took three quarters of the
// matrix's time at 16 ranks, more than the collectives it checks.
inline size_t contribution_period(DType dtype, ReduceOp op) {
  if (dtype == DType::kBool) return 2;
  switch (op.kind) {
    case ReduceOp::PRODUCT:
      return 2;
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      return 128;
    case ReduceOp::MIN:
    case ReduceOp::MAX:
      return 23;
    default:
      return 4;
  }
}

inline double get_value(DType d, const void* p, size_t i) {
  return load_element(d, p, i);
}
inline void set_value(DType d, void* p, size_t i, double v) {
  store_element(d, p, i, v);
}

// stored returns what `v` becomes once stored in `dtype` (wrapping, rounding).
// It runs once per checked element, so it keeps the element on the stack:
// a heap buffer per element made the matrix's checks spend most of their
// time in malloc, several times over under AddressSanitizer.
inline double stored(DType dtype, double v) {
  alignas(8) unsigned char element[8];
  set_value(dtype, element, 0, v);
  return get_value(dtype, element, 0);
}

// expected is the reduction over `world` ranks of element i, before it is
// stored in the dtype (set_value does the wrapping).
inline double expected(DType dtype, ReduceOp op, int world, size_t i) {
  double acc = contribution(dtype, op, 0, i);
  int64_t bits = static_cast<int64_t>(acc);
  if (op.kind == ReduceOp::PREMUL_SUM) acc *= op.factor;
  for (int r = 1; r < world; ++r) {
    double v = contribution(dtype, op, r, i);
    int64_t b = static_cast<int64_t>(v);
    if (dtype == DType::kBool) {
      bool a = acc != 0, x = v != 0;
      switch (op.kind) {
        case ReduceOp::PRODUCT:
        case ReduceOp::MIN:
        case ReduceOp::BAND:
          acc = a && x;
          break;
        case ReduceOp::BXOR:
          acc = a != x;
          break;
        default:
          acc = a || x;
          break;
      }
      continue;
    }
    switch (op.kind) {
      case ReduceOp::SUM:
      case ReduceOp::AVG:
        acc += v;
        break;
      case ReduceOp::PREMUL_SUM:
        acc += v * op.factor;
        break;
      case ReduceOp::PRODUCT:
        acc *= v;
        break;
      case ReduceOp::MIN:
        acc = std::min(acc, v);
        break;
      case ReduceOp::MAX:
        acc = std::max(acc, v);
        break;
      case ReduceOp::BAND:
        bits &= b;
        acc = static_cast<double>(bits);
        break;
      case ReduceOp::BOR:
        bits |= b;
        acc = static_cast<double>(bits);
        break;
      case ReduceOp::BXOR:
        bits ^= b;
        acc = static_cast<double>(bits);
        break;
    }
  }
  // AVG on integers: the sum as the dtype holds it, divided by the size and
  // truncated toward zero (NCCL's AVG, which cohort follows).
  if (op.kind == ReduceOp::AVG && !is_floating(dtype)) return std::trunc(stored(dtype, acc) / world);
  if (op.kind == ReduceOp::AVG) acc /= world;
  return acc;
}

// Bytes holds a buffer of any dtype.
struct TypedBuffer {
  DType dtype;
  std::vector<uint8_t> bytes;
  TypedBuffer(DType d, size_t count) : dtype(d), bytes(count * dtype_size(d) + 1) {}
  size_t count() const { return (bytes.size() - 1) / dtype_size(dtype); }
  Buffer view() { return Buffer{bytes.data(), count(), dtype, Device{}}; }
  double at(size_t i) const { return get_value(dtype, bytes.data(), i); }
  void set(size_t i, double v) { set_value(dtype, bytes.data(), i, v); }
};

// fill_contributions gives element i of `buf` rank's contribution to
// element first + i of the reduction: one period from contribution(), then
// copies of it, doubling.
inline void fill_contributions(TypedBuffer& buf, ReduceOp op, int rank, size_t first = 0) {
  const size_t n = buf.count(), size = dtype_size(buf.dtype);
  const size_t period = std::min(n, contribution_period(buf.dtype, op));
  for (size_t i = 0; i < period; ++i) buf.set(i, contribution(buf.dtype, op, rank, first + i));
  for (size_t have = period; have < n;) {
    const size_t more = std::min(have, n - have);
    std::memcpy(buf.bytes.data() + have * size, buf.bytes.data(), more * size);
    have += more;
  }
}

// PeriodicValues holds, for one period of i, what element i must read
// once stored in the dtype: the reduction's result, or one rank's own
// contribution (a reduce's other ranks keep theirs).
class PeriodicValues {
 public:
  static PeriodicValues reduction(DType dtype, ReduceOp op, int world) {
    return PeriodicValues(dtype, op, [&](size_t i) { return expected(dtype, op, world, i); });
  }
  static PeriodicValues contribution_of(DType dtype, ReduceOp op, int rank) {
    return PeriodicValues(dtype, op, [&](size_t i) { return contribution(dtype, op, rank, i); });
  }
  double at(size_t i) const { return values_[i % values_.size()]; }

 private:
  template <typename Value>
  PeriodicValues(DType dtype, ReduceOp op, Value value) {
    for (size_t i = 0; i < contribution_period(dtype, op); ++i) values_.push_back(stored(dtype, value(i)));
  }
  std::vector<double> values_;
};

// close_enough compares a result with its reference: exact for integers,
// within rounding for floating dtypes (AVG and PREMUL_SUM scale).
inline bool close_enough(DType dtype, double got, double want) {
  if (!is_floating(dtype)) return got == want;
  double tol = (dtype == DType::kFloat16 || dtype == DType::kBFloat16) ? 1e-2 : 1e-5;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

inline std::vector<DType> all_dtypes() {
  return {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
          DType::kUInt8,   DType::kInt16,   DType::kInt32,   DType::kInt64,    DType::kBool};
}

inline std::vector<ReduceOp> ops_for(DType dtype) {
  std::vector<ReduceOp> ops = {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX};
  if (is_floating(dtype)) {
    ops.push_back(ReduceOp::AVG);
    ops.push_back(ReduceOp::premul_sum(0.5));
  } else {
    if (dtype != DType::kBool) ops.push_back(ReduceOp::AVG);
    ops.push_back(ReduceOp::BAND);
    ops.push_back(ReduceOp::BOR);
    ops.push_back(ReduceOp::BXOR);
  }
  return ops;
}

// counts: empty, one, odd, medium (halving-doubling), and just over 1 MiB.
// Every dtype's kernels run at the first four. The count over 1 MiB is for
// the large-message paths (pipelined, segmented, read in place), which the
// algorithms choose by bytes, not dtype, and which cut messages on element
// boundaries: so it runs for one dtype of each element size (float64,
// float32, float16, uint8), which was a third of the product's run where
// every dtype had it. Where each algorithm runs at up to 16 ranks (the
// algorithm matrix) and in sanitized builds (COHORT_SANITIZE, 3-15 times
// slower: docs/sanitizers.md) it runs for float32 and float16 only.
enum class LargeCountDtypes { kOnePerElementSize, kFloat32AndFloat16 };

inline LargeCountDtypes& large_count_dtypes() {
  static LargeCountDtypes which = LargeCountDtypes::kOnePerElementSize;
  return which;
}

// In sanitized builds the large count also runs for two ops only: SUM, and
// AVG for its pass that scales the sum. How a large message is cut,
// pipelined and handed between the ranks' threads does not depend on the
// op, and every op's kernel runs at the four smaller counts (20001
// elements: vector bodies and tails); the large count under the other four
// float ops was about half of the matrix's time under TSan.
inline bool gets_large_count(DType dtype, ReduceOp op) {
  const bool float32_or_16 = dtype == DType::kFloat32 || dtype == DType::kFloat16;
#ifdef COHORT_SANITIZED_BUILD
  return float32_or_16 && (op.kind == ReduceOp::SUM || op.kind == ReduceOp::AVG);
#else
  (void)op;
  if (large_count_dtypes() == LargeCountDtypes::kFloat32AndFloat16) return float32_or_16;
  return float32_or_16 || dtype == DType::kFloat64 || dtype == DType::kUInt8;
#endif
}

inline std::vector<size_t> counts_for(DType dtype, ReduceOp op) {
  if (!gets_large_count(dtype, op)) return {0, 1, 7, 20001};
  return {0, 1, 7, 20001, (size_t{1} << 20) / dtype_size(dtype) + 3};
}

}  // namespace cohort::testing
