// autograd/gradcheck.cpp — finite-difference check of analytic gradients.
#include "memgrad/autograd/gradcheck.h"

#include <cmath>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"

namespace mg {

namespace {

// The output of fn as float64 values, computed without recording.
std::vector<double> evaluate(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return fn(inputs).to_vector<double>();
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  for (const Tensor& input : inputs) {
    if (!input.defined() || !input.requires_grad()) continue;
    MG_CHECK(input.dtype() == DType::Float64 && input.is_leaf() && input.is_contiguous(),
             "gradcheck: inputs that require grad must be contiguous float64 leaves, got ",
             input.dtype(), " of shape ", input.sizes());
  }
  Tensor output = fn(inputs);
  MG_CHECK(output.requires_grad(), "gradcheck: the output does not require grad");
  int64_t output_count = output.numel();

  for (size_t which = 0; which < inputs.size(); ++which) {
    const Tensor& input = inputs[which];
    if (!input.defined() || !input.requires_grad()) continue;
    int64_t input_count = input.numel();
    double* values = input.data_ptr<double>();

    // numeric[j][i] = d output_i / d input_j by central differences.
    std::vector<std::vector<double>> numeric(static_cast<size_t>(input_count));
    for (int64_t j = 0; j < input_count; ++j) {
      double original = values[j];
      values[j] = original + options.eps;
      std::vector<double> plus = evaluate(fn, inputs);
      values[j] = original - options.eps;
      std::vector<double> minus = evaluate(fn, inputs);
      values[j] = original;
      numeric[j].resize(plus.size());
      for (size_t i = 0; i < plus.size(); ++i) numeric[j][i] = (plus[i] - minus[i]) / (2 * options.eps);
    }

    // analytic row i: gradient of output_i w.r.t. the input, one backward per element.
    for (int64_t i = 0; i < output_count; ++i) {
      Tensor one_hot = zeros(output.sizes(), {.dtype = DType::Float64});
      one_hot.data_ptr<double>()[i] = 1.0;
      Tensor seed = converted_copy(one_hot, output.dtype(), output.device());
      for (const Tensor& other : inputs) {
        if (other.defined() && other.requires_grad()) other.set_grad(Tensor());
      }
      autograd::backward({output}, {seed}, /*retain_graph=*/true);
      Tensor grad = input.grad();
      std::vector<double> analytic = grad.defined() ? grad.to_vector<double>()
                                                    : std::vector<double>(static_cast<size_t>(input_count), 0.0);
      for (int64_t j = 0; j < input_count; ++j) {
        double expected = numeric[j][static_cast<size_t>(i)];
        double got = analytic[static_cast<size_t>(j)];
        if (!(std::abs(got - expected) <= options.atol + options.rtol * std::abs(expected))) {
          GradcheckResult result;
          result.passed = false;
          result.message = detail::str_cat("gradcheck failed for input ", which, " (shape ", input.sizes(),
                                           ") element ", j, ", output element ", i, ": analytic ", got,
                                           ", numeric ", expected);
          return result;
        }
      }
    }
  }
  for (const Tensor& other : inputs) {
    if (other.defined() && other.requires_grad()) other.set_grad(Tensor());
  }
  return {};
}

}  // namespace mg
