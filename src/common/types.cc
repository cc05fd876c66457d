#include "cohort/types.h"

namespace cohort {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

bool is_floating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 || d == DType::kBFloat16;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op.kind) {
    case ReduceOp::SUM:
      return "SUM";
    case ReduceOp::AVG:
      return "AVG";
    case ReduceOp::PRODUCT:
      return "PRODUCT";
    case ReduceOp::MIN:
      return "MIN";
    case ReduceOp::MAX:
      return "MAX";
    case ReduceOp::BAND:
      return "BAND";
    case ReduceOp::BOR:
      return "BOR";
    case ReduceOp::BXOR:
      return "BXOR";
    case ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
  }
  return "?";
}

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

// Round to nearest even, with infinities, NaN and subnormals.
Half::Half(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xFFu;
  uint32_t man = x & 0x7FFFFFu;
  if (exp == 0xFF) {  // inf or NaN
    bits = static_cast<uint16_t>(sign | 0x7C00u | (man ? 0x200u : 0u));
    return;
  }
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) {  // overflow to infinity
    bits = static_cast<uint16_t>(sign | 0x7C00u);
    return;
  }
  if (e <= 0) {  // subnormal or zero
    if (e < -10) {
      bits = static_cast<uint16_t>(sign);
      return;
    }
    man |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half_man = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_man & 1u))) ++half_man;
    bits = static_cast<uint16_t>(sign | half_man);
    return;
  }
  uint32_t half_man = man >> 13;
  uint32_t rem = man & 0x1FFFu;
  uint32_t out = sign | (static_cast<uint32_t>(e) << 10) | half_man;
  if (rem > 0x1000u || (rem == 0x1000u && (half_man & 1u))) ++out;  // may carry into the exponent: correct
  bits = static_cast<uint16_t>(out);
}

Half::operator float() const {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1Fu;
  uint32_t man = bits & 0x3FFu;
  if (exp == 0) {
    if (man == 0) return bits_float(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400u) == 0);
    man &= 0x3FFu;
    return bits_float(sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (man << 13));
  }
  if (exp == 31) return bits_float(sign | 0x7F800000u | (man << 13));
  return bits_float(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

BFloat16::BFloat16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN stays NaN
    bits = static_cast<uint16_t>((x >> 16) | 0x40u);
    return;
  }
  uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  bits = static_cast<uint16_t>((x + rounding) >> 16);
}

BFloat16::operator float() const {
  return bits_float(static_cast<uint32_t>(bits) << 16);
}

}  // namespace cohort
