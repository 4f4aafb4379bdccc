// core/cpu/copy_fill.cpp — CPU copies with dtype conversion (one tensor or a list), fills,
// and random fills.
#include <cmath>
#include <numbers>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"

namespace mg::cpu {

void copy(const Tensor& source, const Tensor& destination) {
  dispatch_dtype(source.dtype(), [&]<class In>() {
    dispatch_dtype(destination.dtype(), [&]<class Out>() {
      map1<In, Out>(source, destination, [](In value) { return convert_value<Out>(value); });
    });
  });
}

// The CPU pays no launch per tensor, so one copy each is the whole batch.
void convert_each(std::span<const Tensor> sources, std::span<const Tensor> destinations) {
  for (size_t i = 0; i < sources.size(); ++i) copy(sources[i], destinations[i]);
}

void fill(const Tensor& destination, double value) {
  dispatch_dtype(destination.dtype(), [&]<class T>() {
    T typed = convert_value<T>(value);
    Operands<1> operands;
    operands.data = {static_cast<char*>(destination.raw_data())};
    operands.byte_strides = {broadcast_byte_strides(destination, destination.sizes())};
    Shape sizes = destination.sizes();
    to_memory_order(sizes, operands, /*leading=*/0);
    for_each_run<1>(sizes, operands, true,
                    [&](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
                      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = typed;
                    });
  });
}

namespace {

// Fills `destination` (any strides) with sample(block_words) for element i in row-major
// order, where block_words are the 4 Philox words of block offset + i.
template <class Sample>
void fill_random(const Tensor& destination, PhiloxState rng, const char* op, Sample sample) {
  Tensor target = destination.is_contiguous() ? destination : empty_like(destination);
  dispatch_floating(destination.dtype(), op, [&]<class T>() {
    T* data = static_cast<T*>(target.raw_data());
    int64_t count = target.numel();
#pragma omp parallel for schedule(static) if (count >= kParallelGrain)
    for (int64_t i = 0; i < count; ++i) {
      data[i] = static_cast<T>(sample(philox_block(rng, static_cast<uint64_t>(i)), std::is_same_v<T, double>));
    }
  });
  if (!target.is_same(destination)) copy(target, destination);
}

double uniform_unit(const std::array<uint32_t, 4>& words, bool double_precision) {
  return double_precision ? uniform_double_from_bits(words[0], words[1])
                          : static_cast<double>(uniform_from_bits(words[0]));
}

}  // namespace

void fill_uniform(const Tensor& destination, double low, double high, PhiloxState rng) {
  fill_random(destination, rng, "uniform_", [=](const std::array<uint32_t, 4>& words, bool wide) {
    double value = low + (high - low) * uniform_unit(words, wide);
    return value < high ? value : low;  // rounding must not reach the open end
  });
}

void fill_normal(const Tensor& destination, double mean, double std, PhiloxState rng) {
  fill_random(destination, rng, "normal_", [=](const std::array<uint32_t, 4>& words, bool) {
    // Box-Muller on two 53-bit uniforms; 1 - u keeps the logarithm's argument in (0, 1].
    double u1 = 1.0 - uniform_double_from_bits(words[0], words[1]);
    double u2 = uniform_double_from_bits(words[2], words[3]);
    return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  });
}

}  // namespace mg::cpu
