// nn/loss.h — losses as modules: CrossEntropyLoss, NLLLoss, MSELoss. Each calls its op in
// autograd/loss.h with the options it was built with.
#pragma once

#include <cstdint>

#include "memgrad/autograd/loss.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

// A module whose forward takes (input, target); each loss implements compute().
// NOTE: compute() rather than a virtual two-input forward, which would hide Module's
// virtual single-input forward (a -Woverloaded-virtual warning) in every loss. That one
// stays callable and throws, naming the loss; loss(x) does not compile.
class Loss : public Module {
 public:
  using Module::Module;
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) { return compute(input, target); }
  Tensor operator()(const Tensor& input, const Tensor& target) { return compute(input, target); }

 private:
  virtual Tensor compute(const Tensor& input, const Tensor& target) = 0;
};

// logits (N, C), target (N) int64 class indices.
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(CrossEntropyOptions options = {});
  const CrossEntropyOptions& options() const { return options_; }

 private:
  Tensor compute(const Tensor& input, const Tensor& target) override;
  CrossEntropyOptions options_;
};

// log_probs (N, C), target (N) int64 class indices.
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);

 private:
  Tensor compute(const Tensor& input, const Tensor& target) override;
  Reduction reduction_;
  int64_t ignore_index_;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean);

 private:
  Tensor compute(const Tensor& input, const Tensor& target) override;
  Reduction reduction_;
};

}  // namespace mg::nn
