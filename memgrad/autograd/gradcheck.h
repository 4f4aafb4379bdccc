// autograd/gradcheck.h — checks an op's backward against central finite differences.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool passed = true;
  std::string message;  // on failure: which input, which element, analytic vs numeric
};

// `fn` maps the inputs to one output tensor. Every input that requires grad must be a
// float64 leaf; each is perturbed element by element by ±eps, and the numeric Jacobian
// compared with the one backward computes (one backward per output element, with
// retain_graph). Inputs that do not require grad are held fixed.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace mg
