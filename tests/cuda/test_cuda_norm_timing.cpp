// tests/cuda/test_cuda_norm_timing.cpp — a hidden case ("[bn-timing]") that times the CUDA
// batch-norm kernels alone at ResNet-50's shapes (batch 128, float16, channels_last) and
// prints each pass's bandwidth next to a device-to-device copy's: how far the batch-norm
// passes of a ResNet step are from the memory's speed. It asserts nothing about speed (a
// shared or throttled GPU would fail it); it is run by hand or by scripts/gpu-check.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/runtime.h"
#include "cuda/gpu_timing.h"

using namespace mg;

namespace {

// ResNet-50's batch-norm outputs per image (H = W, C) and how many of each a step has,
// by kind: the BN + ReLU after a block's first two convolutions and the stem, the plain BN
// of a downsample, the BN + add + ReLU at a block's end.
struct BatchNormShape {
  int64_t size, channels;
  int relu, plain, add_relu;
};

const std::vector<BatchNormShape> kResNet50 = {
    {112, 64, 1, 0, 0},   {56, 64, 6, 0, 0},    {56, 256, 0, 1, 3},  {56, 128, 1, 0, 0},
    {28, 128, 7, 0, 0},   {28, 512, 0, 1, 4},   {28, 256, 1, 0, 0},  {14, 256, 11, 0, 0},
    {14, 1024, 0, 1, 6},  {14, 512, 1, 0, 0},   {7, 512, 5, 0, 0},   {7, 2048, 0, 1, 3},
};

}  // namespace

TEST_CASE("Timing: CUDA batch-norm passes at ResNet-50's shapes against a copy's bandwidth", "[.][bn-timing]") {
  NoGradGuard no_grad;
  const Device device = Device::cuda();
  const cuda::Stream stream = cuda::Stream::current(device);
  const TensorOptions half{.dtype = DType::Float16, .device = device};
  const TensorOptions single{.dtype = DType::Float32, .device = device};
  constexpr int64_t kBatch = 128;

  std::ostringstream table;
  table << "batch 128, float16, channels_last; GB/s = bytes the pass must move / its time\n"
        << "shape           | copy GB/s | fwd relu ms (GB/s) | bwd relu ms (GB/s) | fwd add_relu ms (GB/s) | "
           "bwd add_relu ms (GB/s) | fwd plain ms\n";
  double step_forward = 0, step_backward = 0, step_bytes = 0;
  for (const BatchNormShape& shape : kResNet50) {
    const Shape sizes{kBatch, shape.channels, shape.size, shape.size};
    const auto make = [&] { return empty(sizes, half, MemoryFormat::ChannelsLast); };
    Generator generator(11);
    const Tensor x = contiguous_copy(converted_copy(randn(sizes, {}, &generator), DType::Float16, device),
                                     MemoryFormat::ChannelsLast);
    const Tensor residual = x, grad = x;
    Tensor y = make(), dx = make(), dr = make();
    const auto channel = [&] { return empty({shape.channels}, single); };
    Tensor weight = ones({shape.channels}, single), bias = zeros({shape.channels}, single);
    Tensor running_mean = zeros({shape.channels}, single), running_var = ones({shape.channels}, single);
    // Counted as nn::BatchNorm2d counts it, so the forward is timed as a training step runs it.
    Tensor batches_tracked = zeros(Shape{}, {.dtype = DType::Int64, .device = device});
    Tensor mean = channel(), invstd = channel(), grad_weight = channel(), grad_bias = channel();
    const double bytes = static_cast<double>(x.nbytes());

    const auto forward = [&](bool relu, const Tensor& added) {
      cuda::batch_norm(x, weight, bias, running_mean, running_var, batches_tracked, /*training=*/true, 0.1, 1e-5, relu,
                       added, {}, y, mean, invstd);
    };
    const double copy_ms = gpu_timing::median_ms([&] {
      cudaMemcpyAsync(dx.raw_data(), x.raw_data(), x.nbytes(), cudaMemcpyDeviceToDevice, stream.handle());
    });
    const double relu_forward = gpu_timing::median_ms([&] { forward(true, {}); });
    const double relu_backward = gpu_timing::median_ms([&] {
      cuda::batch_norm_backward(grad, x, weight, bias, mean, invstd, /*relu=*/true, {}, dx, grad_weight, grad_bias, {});
    });
    const double add_forward = gpu_timing::median_ms([&] { forward(true, residual); });
    const double add_backward = gpu_timing::median_ms([&] {
      cuda::batch_norm_backward(grad, x, weight, bias, mean, invstd, /*relu=*/true, y, dx, grad_weight, grad_bias, dr);
    });
    const double plain_forward = gpu_timing::median_ms([&] { forward(false, {}); });
    const double plain_backward = gpu_timing::median_ms([&] {
      cuda::batch_norm_backward(grad, x, weight, bias, mean, invstd, /*relu=*/false, {}, dx, grad_weight, grad_bias, {});
    });
    // Bytes each pass must move, in units of the tensor (see batch_norm.cu's header):
    // copy 2; forward 3 (4 with a residual); backward 5 (7 with a residual).
    const auto rate = [&](double units, double ms) { return units * bytes / (ms * 1e6); };
    char line[320];
    std::snprintf(line, sizeof line,
                  "%3lldx%-3lld x %4lld | %9.0f | %7.4f (%5.0f)    | %7.4f (%5.0f)    | %7.4f (%5.0f)        | "
                  "%7.4f (%5.0f)        | %7.4f\n",
                  static_cast<long long>(shape.size), static_cast<long long>(shape.size),
                  static_cast<long long>(shape.channels), rate(2, copy_ms), relu_forward, rate(3, relu_forward),
                  relu_backward, rate(5, relu_backward), add_forward, rate(4, add_forward), add_backward,
                  rate(7, add_backward), plain_forward);
    table << line;
    step_forward += shape.relu * relu_forward + shape.add_relu * add_forward + shape.plain * plain_forward;
    step_backward += shape.relu * relu_backward + shape.add_relu * add_backward + shape.plain * plain_backward;
    step_bytes += bytes * (shape.relu * 8 + shape.add_relu * 11 + shape.plain * 8);
  }
  char total[240];
  std::snprintf(total, sizeof total,
                "ResNet-50 step's batch norms: forward %.3f ms + backward %.3f ms = %.3f ms for %.2f GB "
                "(%.0f GB/s)\n",
                step_forward, step_backward, step_forward + step_backward, step_bytes / 1e9,
                step_bytes / ((step_forward + step_backward) * 1e6));
  table << total;
  WARN(table.str());
}
