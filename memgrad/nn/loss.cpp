// nn/loss.cpp — the loss modules.
#include "memgrad/nn/loss.h"

namespace mg::nn {

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions options)
    : Loss("CrossEntropyLoss"), options_(options) {}

Tensor CrossEntropyLoss::compute(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, options_);
}

NLLLoss::NLLLoss(Reduction reduction, int64_t ignore_index)
    : Loss("NLLLoss"), reduction_(reduction), ignore_index_(ignore_index) {}

Tensor NLLLoss::compute(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, reduction_, ignore_index_);
}

MSELoss::MSELoss(Reduction reduction) : Loss("MSELoss"), reduction_(reduction) {}

Tensor MSELoss::compute(const Tensor& input, const Tensor& target) {
  return mse_loss(input, target, reduction_);
}

}  // namespace mg::nn
