// autograd/loss.h — losses: cross_entropy (class indices, label smoothing), nll_loss,
// mse_loss.
#pragma once

#include "memgrad/core/tensor.h"

namespace mg {

enum class Reduction { None, Mean, Sum };

struct CrossEntropyOptions {
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;
  int64_t ignore_index = -100;
};

// logits (N, C), target (N) int64 class indices.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {});
// log_probs (N, C), target (N) int64; mean divides by the number of non-ignored targets.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace mg
