// core/quantize_8bit.h — core room: block-wise 8-bit quantisation of optimizer state, as in
// Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization": the arithmetic that
// the CPU kernel (core/cpu/adam_8bit.cpp) and the CUDA kernel (cuda/kernels/adam_8bit.cu)
// both run, written once.
//
// A tensor is cut into blocks of `block_size` consecutive elements (in memory order; the
// last block may be shorter). Each block keeps one float32 absmax = max |x| over the block
// and one uint8 code per element: the index of the map value nearest to x / absmax.
// Dequantising is map[code] * absmax.
//
// The maps are "dynamic" (the paper's dynamic tree quantisation): after an optional sign
// bit, the number of leading zero bits of a code picks a decade 10^-z (z = 0..6), the first
// one bit after them is an indicator, and the remaining bits split the decade's [0.1, 1]
// into equal steps, taking their midpoints. Large values thus get fine steps and small
// ones still have a code down to about 1e-7 of the block's absmax: what Adam's moments,
// which span many orders of magnitude within a tensor, need. Per sign and decade z there
// are 2^(6 - z) values (signed map) or 2^(7 - z) (unsigned map), 127 or 254 in all; the
// all-zero pattern is 0, and the code left over (the signed map's "-0", the unsigned
// map's one past its last decade) is exactly 1, so a block's largest element round-trips
// exactly. The 256 values are stored ascending and a code is an index into them, which
// makes the nearest value a binary search.
//
// Error bound (tests/core/test_quantize_8bit.cpp): an element x whose x / absmax lies
// between map values a < b dequantises to within (b - a) / 2 * absmax of x, up to float32
// rounding. The widest step is the top decade's: 0.9 / 64 (signed) and 0.9 / 128
// (unsigned), so |error| <= 0.00704 * absmax (exp_avg) and <= 0.00352 * absmax
// (exp_avg_sq) for every element (an element at -absmax, below the signed map's lowest
// value -0.99297, is off by 0.00703 * absmax: the same bound). Within decade z the error
// relative to x is at most 4.5 / (values in the decade): 7% (signed) and 3.5% (unsigned)
// in the top decade, coarser below, where the values matter less to the update.
#pragma once

#include <cstdint>

#include "memgrad/core/host_device.h"

namespace mg::quantize_8bit {

inline constexpr int kCodes = 256;
// The paper's block size: absmax costs 4 bytes per 2,048 elements (0.002 bytes each).
inline constexpr int64_t kDefaultBlockSize = 2048;
// The block sizes the kernels take: the CUDA kernel keeps a block's new moments in
// registers, at most 16 per thread of its 256.
inline constexpr int64_t kMinBlockSize = 64;
inline constexpr int64_t kMaxBlockSize = 4096;

// The 256 values of a map, ascending; a code is an index into them.
struct QuantizationMap {
  float values[kCodes];
};

// The dynamic map described above: signed for values in [-1, 1] (Adam's exp_avg),
// unsigned for [0, 1] (exp_avg_sq). Computed in double with + - * / only, so every
// compiler (and nvcc's front end) gives the same float32 table.
constexpr QuantizationMap make_dynamic_map(bool is_signed) {
  constexpr int kDecades = 7;  // 10^0 down to 10^-6: values from 1 down to about 1e-7
  const int top_decade_bits = is_signed ? 6 : 7;  // fraction bits of decade 0
  // magnitudes[z][j]: the j-th value of decade z, ascending.
  double magnitudes[kDecades][128] = {};
  double scale = 1.0;
  for (int z = 0; z < kDecades; ++z) {
    const int count = 1 << (top_decade_bits - z);
    for (int j = 0; j < count; ++j) magnitudes[z][j] = scale * (0.1 + 0.9 * (j + 0.5) / count);
    scale /= 10.0;
  }
  QuantizationMap map{};
  int next = 0;
  if (is_signed) {  // negatives, most negative first: decade 0 from its largest magnitude
    for (int z = 0; z < kDecades; ++z) {
      for (int j = (1 << (top_decade_bits - z)) - 1; j >= 0; --j) map.values[next++] = static_cast<float>(-magnitudes[z][j]);
    }
  }
  map.values[next++] = 0.0f;
  for (int z = kDecades - 1; z >= 0; --z) {
    for (int j = 0; j < (1 << (top_decade_bits - z)); ++j) map.values[next++] = static_cast<float>(magnitudes[z][j]);
  }
  map.values[next++] = 1.0f;
  return map;
}

inline constexpr QuantizationMap kSignedMap = make_dynamic_map(/*is_signed=*/true);
inline constexpr QuantizationMap kUnsignedMap = make_dynamic_map(/*is_signed=*/false);

// The code of 0: what a new state (absmax 0) is filled with.
constexpr uint8_t zero_code(const QuantizationMap& map) {
  for (int code = 0; code < kCodes; ++code) {
    if (map.values[code] == 0.0f) return static_cast<uint8_t>(code);
  }
  return 0;
}

// The code of the map value nearest to `normalized` (a value in the map's range; ties go to
// the lower code). `map` points at 256 ascending floats (a QuantizationMap's values, or a
// copy of them in CUDA shared memory).
MG_HOST_DEVICE inline uint8_t nearest_code(float normalized, const float* map) {
  // The first index whose value is >= normalized (kCodes when none): eight halvings.
  int low = 0;
  int high = kCodes;
  while (low < high) {
    const int middle = (low + high) / 2;
    if (map[middle] < normalized) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  if (low == 0) return 0;
  if (low == kCodes) return kCodes - 1;
  // map[low - 1] < normalized <= map[low]: the nearer of the two.
  return static_cast<uint8_t>(map[low] - normalized < normalized - map[low - 1] ? low : low - 1);
}

// The code of `value` in a block whose absmax is `absmax` (a block of zeros has absmax 0:
// every value is 0 then).
MG_HOST_DEVICE inline uint8_t quantize(float value, float absmax, const float* map) {
  return nearest_code(absmax > 0.0f ? value / absmax : 0.0f, map);
}

MG_HOST_DEVICE inline float dequantize(uint8_t code, float absmax, const float* map) { return map[code] * absmax; }

// The number of blocks (absmax values) of a tensor of `numel` elements.
MG_HOST_DEVICE inline int64_t block_count(int64_t numel, int64_t block_size) {
  return (numel + block_size - 1) / block_size;
}

}  // namespace mg::quantize_8bit
