// docs/guide/checks.h — what the guide's programs compare with when they check their own
// claims (not shown in the page).
#pragma once

#include <algorithm>
#include <vector>

#include <memgrad/memgrad.h>

// The largest |a[i] - b[i]| over all elements of paired tensors of the same shapes.
inline double max_difference(const std::vector<mg::Tensor>& a, const std::vector<mg::Tensor>& b) {
  double largest = 0;
  for (size_t i = 0; i < a.size(); ++i) largest = std::max(largest, (a[i] - b[i]).abs().max().item());
  return largest;
}

// The gradients of `model`'s parameters, in order.
inline std::vector<mg::Tensor> gradients(const mg::nn::Module& model) {
  std::vector<mg::Tensor> grads;
  for (const mg::Tensor& param : model.parameters()) grads.push_back(param.grad());
  return grads;
}
