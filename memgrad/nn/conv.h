// nn/conv.h — Conv2d: the 2-D convolution layer (NCHW), PyTorch's nn.Conv2d with its
// default initialisation.
#pragma once

#include <array>
#include <cstdint>

#include "memgrad/autograd/conv.h"
#include "memgrad/core/random.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

class Conv2d : public Module {
 public:
  // weight and bias start as torch.nn.Conv2d's: kaiming_uniform_(a = sqrt(5)) on the weight,
  // which is uniform within 1/sqrt(fan_in), and the bias uniform within 1/sqrt(fan_in),
  // fan_in = in_channels / groups * kh * kw; drawn from `generator` (default: the global one).
  // NOTE: `options` is taken by reference, not by value, to dodge a wrong-code bug of GCC
  // 12.2 with AVX-512 (-march=native): copying a caller's `{}` (1,1 0,0 1,1 1) into a
  // by-value argument, it rebuilt the first 32 bytes as a broadcast of 1, since
  // ix86_convert_const_wide_int_to_broadcast overlooks the zero upper half of a 256-bit
  // constant (GCC's current source checks for it), so padding came out (1, 0). Seven int64s
  // passed by value reproduce it in plain C at -O2 -mavx512f (CMakeLists.txt, MG_NATIVE_ARCH).
  Conv2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel_size,
         const Conv2dOptions& options = {}, bool has_bias = true, Generator* generator = nullptr);
  // A square kernel.
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& options = {},
         bool has_bias = true, Generator* generator = nullptr);

  // (N, in_channels, H, W) -> (N, out_channels, P, Q)
  Tensor forward(const Tensor& input) override;
  // forward(input) and, in training without a bias, batch norm's statistics of the output
  // where the device makes them with the convolution (autograd/conv.h's
  // conv2d_with_statistics), for the BatchNorm2d that follows.
  ConvWithStatistics forward_with_statistics(const Tensor& input);
  // As PyTorch prints it: "3, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False".
  std::string extra_repr() const override;

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  const std::array<int64_t, 2>& kernel_size() const { return kernel_size_; }
  const Conv2dOptions& options() const { return options_; }

  Tensor weight;  // (out_channels, in_channels / groups, kh, kw)
  Tensor bias;    // (out_channels), undefined when built without bias

 private:
  int64_t in_channels_;
  int64_t out_channels_;
  std::array<int64_t, 2> kernel_size_;
  Conv2dOptions options_;
};

}  // namespace mg::nn
