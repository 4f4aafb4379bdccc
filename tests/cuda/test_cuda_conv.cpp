// tests/cuda/test_cuda_conv.cpp — conv2d on CUDA (im2col/col2im kernels + cuBLAS) against
// the CPU (Eigen) on fresh random inputs: forward and the input, weight and bias gradients
// for plain, strided, padded, dilated, grouped, depthwise and 1x1 convolutions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/conv.h"
#include "autograd/elementwise.h"
#include "autograd/reduce.h"
#include "core/factory.h"

using namespace mg;

namespace {

Tensor normal(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {}, &generator);
}

Tensor on_cuda(const Tensor& tensor) { return converted_copy(tensor, tensor.dtype(), Device::cuda()); }

std::vector<double> host_values(const Tensor& tensor) {
  return converted_copy(tensor, tensor.dtype(), Device::cpu()).to_vector<double>();
}

// The largest |cuda - cpu| relative to the largest |cpu|.
double relative_error(const Tensor& cuda_result, const Tensor& cpu_result) {
  REQUIRE(cuda_result.device().is_cuda());
  REQUIRE(cuda_result.sizes() == cpu_result.sizes());
  std::vector<double> got = host_values(cuda_result), expected = host_values(cpu_result);
  double scale = 1e-30, worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    scale = std::max(scale, std::abs(expected[i]));
    double error = std::abs(got[i] - expected[i]);
    worst = std::isnan(error) ? INFINITY : std::max(worst, error);
  }
  return worst / scale;
}

struct Config {
  Shape input, weight;
  Conv2dOptions options;
};

}  // namespace

TEST_CASE("conv2d on CUDA matches the CPU, forward and all gradients", "[cuda]") {
  std::vector<Config> configs = {
      {{2, 3, 9, 8}, {5, 3, 3, 3}, {}},
      {{3, 4, 11, 10}, {6, 2, 3, 2}, {.stride = {2, 1}, .padding = {1, 2}, .dilation = {2, 1}, .groups = 2}},
      {{2, 8, 7, 7}, {16, 8, 1, 1}, {}},
      {{2, 6, 12, 9}, {6, 1, 3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .groups = 6}},
      {{1, 4, 16, 16}, {8, 4, 5, 5}, {.stride = {3, 2}, .padding = {2, 2}, .dilation = {2, 3}}},
      {{4, 6, 5, 6}, {9, 2, 2, 3}, {.padding = {1, 0}, .groups = 3}},
  };
  uint64_t seed = 100;
  for (const Config& config : configs) {
    Tensor input = normal(config.input, ++seed), weight = normal(config.weight, ++seed);
    Tensor bias = normal({config.weight[0]}, ++seed);
    Tensor input_cpu = input.detach().requires_grad_(), weight_cpu = weight.detach().requires_grad_();
    Tensor bias_cpu = bias.detach().requires_grad_();
    Tensor input_gpu = on_cuda(input).requires_grad_(), weight_gpu = on_cuda(weight).requires_grad_();
    Tensor bias_gpu = on_cuda(bias).requires_grad_();

    Tensor out_cpu = conv2d(input_cpu, weight_cpu, bias_cpu, config.options);
    Tensor out_gpu = conv2d(input_gpu, weight_gpu, bias_gpu, config.options);
    Tensor upstream = normal(out_cpu.sizes(), ++seed);  // random, so every gradient entry is exercised
    sum(mul(out_cpu, upstream)).backward();
    sum(mul(out_gpu, on_cuda(upstream))).backward();

    INFO("input " << config.input << " weight " << config.weight << " groups " << config.options.groups);
    CHECK(relative_error(out_gpu, out_cpu) <= 1e-4);
    CHECK(relative_error(input_gpu.grad(), input_cpu.grad()) <= 1e-4);
    CHECK(relative_error(weight_gpu.grad(), weight_cpu.grad()) <= 1e-4);
    CHECK(relative_error(bias_gpu.grad(), bias_cpu.grad()) <= 1e-4);
  }
}
