// tests/core/test_quantize_8bit.cpp — core/quantize_8bit.h: the two dynamic maps (their
// layout, against the paper's construction), the nearest-code search against a linear
// scan, and the round trip of blocks of 2,048 elements within the bound the header states.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "memgrad/core/quantize_8bit.h"

using namespace mg::quantize_8bit;

namespace {

// The largest gap between two neighbouring map values.
double widest_step(const QuantizationMap& map) {
  double widest = 0;
  for (int code = 1; code < kCodes; ++code) widest = std::max(widest, double(map.values[code]) - map.values[code - 1]);
  return widest;
}

// The code nearest to x by looking at every value (ties to the lower code).
int nearest_by_scan(float x, const QuantizationMap& map) {
  int best = 0;
  for (int code = 1; code < kCodes; ++code) {
    if (std::fabs(map.values[code] - x) < std::fabs(map.values[best] - x)) best = code;
  }
  return best;
}

// Block-wise values whose magnitudes span the maps' seven decades, as Adam's moments do:
// each element is sign * 10^u for u uniform in [-7, 0], times a per-block scale.
std::vector<float> spread_values(int64_t count, int64_t block_size, bool is_signed, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> exponent(-7.0, 0.0), block_exponent(-8.0, 2.0);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(static_cast<size_t>(count));
  double scale = 1;
  for (int64_t i = 0; i < count; ++i) {
    if (i % block_size == 0) scale = std::pow(10.0, block_exponent(generator));
    const double magnitude = scale * std::pow(10.0, exponent(generator));
    values[i] = static_cast<float>(is_signed && negative(generator) ? -magnitude : magnitude);
  }
  return values;
}

}  // namespace

TEST_CASE("the dynamic maps: 256 ascending values, 0 and 1 exact, decades down to 1e-7", "[quantize_8bit]") {
  for (const QuantizationMap* map : {&kSignedMap, &kUnsignedMap}) {
    for (int code = 1; code < kCodes; ++code) REQUIRE(map->values[code - 1] < map->values[code]);
    CHECK(map->values[kCodes - 1] == 1.0f);
    CHECK(map->values[zero_code(*map)] == 0.0f);
  }
  CHECK(zero_code(kSignedMap) == 127);
  CHECK(zero_code(kUnsignedMap) == 0);
  // Decade 0 of the signed map: 64 midpoints of [0.1, 1]; the lowest is the most negative.
  CHECK(kSignedMap.values[0] == static_cast<float>(-(0.1 + 0.9 * 63.5 / 64)));
  CHECK(kSignedMap.values[kCodes - 2] == static_cast<float>(0.1 + 0.9 * 63.5 / 64));
  // Decade 6 holds one value per sign (signed) and two (unsigned): 1e-6 * (0.1 + 0.45) and
  // 1e-6 * (0.1 + 0.9 * 0.25), the smallest magnitudes besides 0.
  CHECK(kSignedMap.values[128] == static_cast<float>(1e-6 * 0.55));
  CHECK(kSignedMap.values[126] == -kSignedMap.values[128]);
  CHECK(kUnsignedMap.values[1] == static_cast<float>(1e-6 * (0.1 + 0.9 * 0.25)));
  // Decade z holds 2^(6 - z) values per sign (signed), 2^(7 - z) (unsigned).
  auto count_in = [](const QuantizationMap& map, double low, double high) {
    return std::count_if(std::begin(map.values), std::end(map.values),
                         [&](float value) { return value > low && value < high; });
  };
  for (int z = 0; z < 7; ++z) {
    const double top = std::pow(10.0, -z) * (1 - 1e-9), bottom = std::pow(10.0, -z) * 0.1 * (1 + 1e-9);
    INFO("decade " << z);
    CHECK(count_in(kSignedMap, bottom, top) == (64 >> z));
    CHECK(count_in(kUnsignedMap, bottom, top) == (128 >> z));
  }
  // The widest steps are the top decade's, which the header's bound is made of.
  CHECK(widest_step(kSignedMap) == Approx(0.9 / 64).epsilon(1e-5));
  CHECK(widest_step(kUnsignedMap) == Approx(0.9 / 128).epsilon(1e-5));
}

TEST_CASE("nearest_code finds the nearest map value, as a scan of all 256 does", "[quantize_8bit]") {
  std::mt19937 generator(3);
  for (const QuantizationMap* map : {&kSignedMap, &kUnsignedMap}) {
    for (int code = 0; code < kCodes; ++code) REQUIRE(nearest_code(map->values[code], map->values) == code);
    std::uniform_real_distribution<float> uniform(map == &kSignedMap ? -1.0f : 0.0f, 1.0f);
    std::uniform_real_distribution<double> exponent(-8.0, 0.0);
    for (int trial = 0; trial < 20000; ++trial) {
      // Half uniform, half spread over the decades.
      float x = trial % 2 == 0 ? uniform(generator) : static_cast<float>(std::pow(10.0, exponent(generator)));
      if (map == &kSignedMap && trial % 4 == 1) x = -x;
      INFO("x = " << x);
      REQUIRE(nearest_code(x, map->values) == nearest_by_scan(x, *map));
    }
    // Beyond the ends: the end codes.
    CHECK(nearest_code(-2.0f, map->values) == 0);
    CHECK(nearest_code(2.0f, map->values) == kCodes - 1);
  }
  // A tie goes to the lower code.
  const float a = kSignedMap.values[200], b = kSignedMap.values[201];
  const float middle = (a + b) / 2;
  if (middle - a == b - middle) CHECK(nearest_code(middle, kSignedMap.values) == 200);
}

TEST_CASE("a block of 2048 round-trips within half its map step times its absmax", "[quantize_8bit]") {
  const int64_t block_size = kDefaultBlockSize;
  const int64_t count = 8 * block_size + 123;  // the last block is short
  for (const QuantizationMap* map : {&kSignedMap, &kUnsignedMap}) {
    const bool is_signed = map == &kSignedMap;
    const std::vector<float> values = spread_values(count, block_size, is_signed, is_signed ? 11 : 12);
    // The header's bound: half the widest step, 0.00704 (signed) and 0.00352 (unsigned).
    const double global_bound = widest_step(*map) / 2;
    double largest_ratio = 0;  // max |error| / absmax over every element
    for (int64_t block = 0; block < block_count(count, block_size); ++block) {
      const int64_t begin = block * block_size, end = std::min(begin + block_size, count);
      float absmax = 0;
      for (int64_t i = begin; i < end; ++i) absmax = std::max(absmax, std::fabs(values[i]));
      for (int64_t i = begin; i < end; ++i) {
        const uint8_t code = quantize(values[i], absmax, map->values);
        const double error = std::fabs(double(dequantize(code, absmax, map->values)) - values[i]);
        // The map values around x / absmax (the nearest one on each side; an end value alone).
        const double normalized = double(values[i]) / absmax;
        const float* upper = std::lower_bound(std::begin(map->values), std::end(map->values), float(normalized));
        const double above = upper == std::end(map->values) ? map->values[kCodes - 1] : *upper;
        const double below = upper == std::begin(map->values) ? map->values[0] : *(upper - 1);
        const double local_bound =
            std::max({(above - below) / 2, normalized - map->values[kCodes - 1], map->values[0] - normalized});
        INFO("block " << block << " element " << i << ": " << values[i] << " absmax " << absmax << " code "
                      << int(code));
        // float32 rounding of x / absmax and of map * absmax: a few parts in 1e7 of absmax.
        REQUIRE(error <= (local_bound + 1e-6) * absmax);
        largest_ratio = std::max(largest_ratio, error / absmax);
      }
      // The largest element of a block is exact (the map holds 1; -1 is off by a half step).
      const float* largest = std::max_element(values.data() + begin, values.data() + end,
                                              [](float a, float b) { return std::fabs(a) < std::fabs(b); });
      if (*largest > 0) CHECK(dequantize(quantize(*largest, absmax, map->values), absmax, map->values) == *largest);
    }
    INFO((is_signed ? "signed" : "unsigned") << " map: largest |error| / absmax " << largest_ratio);
    CHECK(largest_ratio <= global_bound + 1e-6);
    CHECK(largest_ratio > 0.5 * global_bound);  // the bound is nearly reached: it is tight
  }
}

TEST_CASE("a block of zeros has absmax 0 and dequantises to zeros", "[quantize_8bit]") {
  for (const QuantizationMap* map : {&kSignedMap, &kUnsignedMap}) {
    const uint8_t code = quantize(0.0f, 0.0f, map->values);
    CHECK(code == zero_code(*map));
    CHECK(dequantize(code, 0.0f, map->values) == 0.0f);
    CHECK(dequantize(37, 0.0f, map->values) == 0.0f);  // any code, with absmax 0
  }
  CHECK(block_count(0, 2048) == 0);
  CHECK(block_count(2048, 2048) == 1);
  CHECK(block_count(2049, 2048) == 2);
}
