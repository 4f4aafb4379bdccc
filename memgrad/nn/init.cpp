// nn/init.cpp — parameter initialisation.
#include "memgrad/nn/init.h"

#include <cmath>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"

namespace mg::nn::init {

namespace {
thread_local bool skipping = false;
}  // namespace

SkipInitGuard::SkipInitGuard() : previous_(skipping) { skipping = true; }
SkipInitGuard::~SkipInitGuard() { skipping = previous_; }

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  MG_CHECK(tensor.dim() >= 2, "calculate_fan_in_and_fan_out: the tensor has shape ", tensor.sizes(),
           "; fan in and fan out need at least 2 dimensions (out, in, *kernel)");
  int64_t receptive_field = 1;
  for (int dim = 2; dim < tensor.dim(); ++dim) receptive_field *= tensor.size(dim);
  return {tensor.size(1) * receptive_field, tensor.size(0) * receptive_field};
}

const Tensor& kaiming_uniform_(const Tensor& tensor, double a, Generator* generator) {
  // An empty weight has nothing to fill (and fan_in 0 would make the bound infinite).
  if (tensor.numel() == 0) return tensor;
  int64_t fan_in = calculate_fan_in_and_fan_out(tensor).first;
  double gain = std::sqrt(2.0 / (1.0 + a * a));
  double std = gain / std::sqrt(static_cast<double>(fan_in));
  double bound = std::sqrt(3.0) * std;
  return init::uniform_(tensor, -bound, bound, generator);
}

const Tensor& kaiming_normal_(const Tensor& tensor, double a, FanMode mode, Generator* generator) {
  if (tensor.numel() == 0) return tensor;  // nothing to fill, and a zero fan has no std
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  double gain = std::sqrt(2.0 / (1.0 + a * a));
  return init::normal_(tensor, 0.0, gain / std::sqrt(static_cast<double>(fan)), generator);
}

const Tensor& uniform_(const Tensor& tensor, double low, double high, Generator* generator) {
  if (skipping) return tensor;
  NoGradGuard no_grad;
  mg::uniform_(tensor, low, high, generator);
  return tensor;
}

const Tensor& normal_(const Tensor& tensor, double mean, double std, Generator* generator) {
  if (skipping) return tensor;
  NoGradGuard no_grad;
  mg::normal_(tensor, mean, std, generator);
  return tensor;
}

const Tensor& zeros_(const Tensor& tensor) {
  if (skipping) return tensor;
  NoGradGuard no_grad;
  return tensor.zero_();
}

const Tensor& ones_(const Tensor& tensor) {
  if (skipping) return tensor;
  NoGradGuard no_grad;
  return tensor.fill_(1.0);
}

}  // namespace mg::nn::init
