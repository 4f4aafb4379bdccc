// core/half.h — 16-bit floating-point storage types: IEEE float16 (Half) and bfloat16.
//
// Both are plain 16-bit containers: arithmetic happens in float after conversion, which is
// how CPU kernels treat them (and what autocast's "compute in float32" means).
// Conversion from float rounds to nearest, ties to even, as hardware does.
#pragma once

#include <bit>
#include <cstdint>

namespace mg {

struct Half {
  uint16_t bits = 0;

  Half() = default;
  Half(float value) : bits(from_float(value)) {}  // NOLINT: implicit like a built-in float
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float value);
  static float to_float(uint16_t bits);
};

struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  BFloat16(float value) : bits(from_float(value)) {}  // NOLINT: implicit like a built-in float
  operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

  static uint16_t from_float(float value) {
    uint32_t raw = std::bit_cast<uint32_t>(value);
    if ((raw & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((raw >> 16) | 0x40);  // quiet NaN
    uint32_t rounding_bias = 0x7fffu + ((raw >> 16) & 1u);
    return static_cast<uint16_t>((raw + rounding_bias) >> 16);
  }
};

inline uint16_t Half::from_float(float value) {
  uint32_t raw = std::bit_cast<uint32_t>(value);
  uint32_t sign = (raw >> 16) & 0x8000u;
  uint32_t magnitude = raw & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (magnitude < 0x38800000u) {
    // Subnormal half (or zero): shift the implicit-one mantissa into place, round to even.
    if (magnitude < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    uint32_t exponent = magnitude >> 23;
    uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exponent;  // value / 2^-24 == mantissa * 2^(exponent - 126)
    uint32_t half_mantissa = mantissa >> shift;
    uint32_t remainder = mantissa & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) ++half_mantissa;
    return static_cast<uint16_t>(sign | half_mantissa);
  }
  // Normal: rebias the exponent from 127 to 15 and round the 13 dropped mantissa bits to even.
  uint32_t rebased = magnitude - 0x38000000u;
  uint32_t rounded = rebased + 0x0fffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float Half::to_float(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal: value = mantissa * 2^-24.
    float value = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -value : value;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace mg
