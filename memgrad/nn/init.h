// nn/init.h — filling parameters in place with their initial values, as torch.nn.init.
//
// Every function writes under NoGradGuard (initialising a parameter is not part of any
// graph) and bumps the tensor's version.
#pragma once

#include <cstdint>
#include <utility>

#include "memgrad/core/random.h"
#include "memgrad/core/tensor.h"

namespace mg::nn::init {

// (fan_in, fan_out) of a weight of shape (out, in, *kernel): fan_in = in * kernel elements,
// fan_out = out * kernel elements. The tensor needs at least 2 dimensions.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

// Uniform in [-bound, bound] with bound = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2))
// (He et al. 2015, fan_in mode, leaky_relu gain with negative slope `a`).
const Tensor& kaiming_uniform_(const Tensor& tensor, double a = 0.0, Generator* generator = nullptr);

// Which fan scales a Kaiming init: fan_in keeps the forward activations' variance, fan_out
// the backward gradients' (torchvision's ResNet uses fan_out for its convolutions).
enum class FanMode { FanIn, FanOut };
// Normal with std = gain / sqrt(fan), gain = sqrt(2 / (1 + a^2)); a = 0 is the ReLU gain
// sqrt(2), so kaiming_normal_(w, 0.0, FanMode::FanOut) is torch's
// kaiming_normal_(w, mode="fan_out", nonlinearity="relu").
const Tensor& kaiming_normal_(const Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                              Generator* generator = nullptr);
const Tensor& uniform_(const Tensor& tensor, double low = 0.0, double high = 1.0,
                       Generator* generator = nullptr);
const Tensor& normal_(const Tensor& tensor, double mean = 0.0, double std = 1.0,
                      Generator* generator = nullptr);
const Tensor& zeros_(const Tensor& tensor);
const Tensor& ones_(const Tensor& tensor);

// While one is alive on this thread, every function above returns its tensor unfilled (as
// torch.nn.utils.skip_init): for models whose values nobody reads, as a memory prediction's
// on the simulated device, where drawing a large model's initial weights on the CPU would
// take most of the time (GPT-2's 124M normals: seconds; 1.5B: a minute on two cores).
// The parameters' sizes, dtypes and allocation order are unchanged.
class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace mg::nn::init
