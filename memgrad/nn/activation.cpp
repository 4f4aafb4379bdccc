// nn/activation.cpp — the parameter-free layers, each a call to its op in autograd/.
#include "memgrad/nn/activation.h"

#include "memgrad/autograd/dropout.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/unary.h"

namespace mg::nn {

Tensor ReLU::forward(const Tensor& input) { return relu(input); }

Tensor GELU::forward(const Tensor& input) { return gelu(input, approximate_); }

std::string GELU::extra_repr() const {
  return approximate_ == GeluApproximate::Tanh ? "approximate='tanh'" : "approximate='none'";
}

Dropout::Dropout(double p) : Module("Dropout"), p_(p) {
  MG_CHECK(p >= 0.0 && p <= 1.0, "Dropout(p=", p, "): p is the probability of zeroing an element ",
           "and must be in [0, 1]");
}

Tensor Dropout::forward(const Tensor& input) { return dropout(input, p_, is_training()); }

std::string Dropout::extra_repr() const { return detail::str_cat("p=", p_); }

Flatten::Flatten(int64_t start_dim, int64_t end_dim)
    : Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}

Tensor Flatten::forward(const Tensor& input) { return flatten(input, start_dim_, end_dim_); }

std::string Flatten::extra_repr() const {
  return detail::str_cat("start_dim=", start_dim_, ", end_dim=", end_dim_);
}

}  // namespace mg::nn
