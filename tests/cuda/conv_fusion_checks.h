// tests/cuda/conv_fusion_checks.h — what the tests of cuDNN's fused convolutions share
// (test_cuda_conv_statistics.cpp, test_cuda_dgrad_batch_norm.cpp): a convolution's shape
// with "same" padding, random 16-bit operands on the GPU, values read back as doubles, and
// a scope that sets one of cuda/cudnn/settings.h's fusion switches.
#pragma once

#include <cstdint>
#include <vector>

#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/cudnn/settings.h"

namespace conv_fusion_checks {

using namespace mg;

// A 2-D convolution: input (batch, in_channels, size, size), a square kernel with padding
// kernel / 2, so that stride 1 keeps the size.
struct ConvShape {
  const char* name;
  int64_t batch, in_channels, out_channels, size, kernel, stride;
  int64_t padding() const { return kernel / 2; }
  int64_t out_size() const { return (size + 2 * padding() - kernel) / stride + 1; }
  Shape input() const { return {batch, in_channels, size, size}; }
  Shape weight() const { return {out_channels, in_channels, kernel, kernel}; }
  Shape output() const { return {batch, out_channels, out_size(), out_size()}; }
  Window2d window() const {
    Window2d window;
    window.stride_h = window.stride_w = stride;
    window.pad_h = window.pad_w = padding();
    return window;
  }
  Conv2dOptions options() const { return {.stride = {stride, stride}, .padding = {padding(), padding()}}; }
};

// ResNet-50's convolutions that follow a ReLU (a Bottleneck's 3x3, also strided, and its
// 1x1s), at batch 128: what the timing cases time, their input taken as a batch norm +
// ReLU's output.
inline const std::vector<ConvShape> kResNet50AfterBatchNormRelu = {
    {"1x1, 64 -> 64 at 56x56", 128, 64, 64, 56, 1, 1},
    {"3x3, 64 -> 64 at 56x56", 128, 64, 64, 56, 3, 1},
    {"1x1, 64 -> 256 at 56x56", 128, 64, 256, 56, 1, 1},
    {"3x3 stride 2, 128 -> 128 at 56x56", 128, 128, 128, 56, 3, 2},
    {"1x1, 128 -> 512 at 28x28", 128, 128, 512, 28, 1, 1},
    {"3x3, 256 -> 256 at 14x14", 128, 256, 256, 14, 3, 1},
    {"1x1, 256 -> 1024 at 14x14", 128, 256, 1024, 14, 1, 1},
    {"3x3, 512 -> 512 at 7x7", 128, 512, 512, 7, 3, 1},
    {"1x1, 512 -> 2048 at 7x7", 128, 512, 2048, 7, 1, 1},
};

// Standard normal values times `scale` in `dtype` on the GPU, dense in `layout`.
inline Tensor random_on_gpu(const Shape& sizes, double scale, uint64_t seed, DType dtype,
                            MemoryFormat layout = MemoryFormat::Contiguous) {
  Generator generator(seed);
  Tensor values = mul(randn(sizes, {}, &generator), scale);
  return contiguous_copy(converted_copy(values, dtype, Device::cuda()), layout);
}

inline std::vector<double> host_doubles(const Tensor& tensor) {
  return converted_copy(tensor, DType::Float64, Device::cpu()).to_vector<double>();
}

// A fusion switch (set_cudnn_fusion, set_cudnn_backward_fusion) at `on` for a scope, and
// back to what it was after.
class SwitchScope {
 public:
  SwitchScope(void (*set)(bool), bool (*get)(), bool on) : set_(set), previous_(get()) { set_(on); }
  ~SwitchScope() { set_(previous_); }
  SwitchScope(const SwitchScope&) = delete;
  SwitchScope& operator=(const SwitchScope&) = delete;

 private:
  void (*set_)(bool);
  bool previous_;
};

// set_cudnn_fusion (off by default) and set_cudnn_backward_fusion (on by default).
struct FusionSwitch : SwitchScope {
  explicit FusionSwitch(bool on) : SwitchScope(cuda::set_cudnn_fusion, cuda::cudnn_fusion, on) {}
};
struct BackwardFusionSwitch : SwitchScope {
  explicit BackwardFusionSwitch(bool on)
      : SwitchScope(cuda::set_cudnn_backward_fusion, cuda::cudnn_backward_fusion, on) {}
};

}  // namespace conv_fusion_checks
