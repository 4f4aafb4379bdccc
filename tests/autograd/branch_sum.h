// tests/autograd/branch_sum.h — a tensor with two consumers, as a residual block's input
// has: conv2d(x) and a branch made after it (so that backward runs the branch first and
// its gradient of x is waiting when the convolution's backward runs). The convolution
// should add its input gradient into the branch's buffer in place
// (autograd/engine.h, take_delivered_gradient) unless something else holds that buffer.
// Shared by the CPU test (tests/autograd/test_conv.cpp) and the CUDA one.
#pragma once

#include <memory>
#include <vector>

#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"

namespace mg_test {

struct BranchSum {
  mg::Tensor grad_of_x;         // what reached the leaf x: conv2d's input gradient + the branch's
  bool summed_in_branch_buffer;  // whether that sum lives in the buffer the branch returned
  mg::Tensor kept;              // the branch's gradient, when the branch kept a handle to it
};

// loss = sum(conv2d(x, weight) * upstream) + sum(branch(x)), where the branch's backward
// returns grad * scale, dense in `branch_format`, and keeps a handle to it when `keep`.
// x is a fresh leaf (a hook is registered on it).
inline BranchSum conv_beside_branch(const mg::Tensor& x, const mg::Tensor& weight, const mg::Tensor& upstream,
                                    const mg::Tensor& scale, const mg::Conv2dOptions& options, bool keep,
                                    mg::MemoryFormat branch_format) {
  BranchSum result{};
  const void* branch_data = nullptr;
  auto grad_of_x = std::make_shared<mg::Tensor>();
  x.register_hook([grad_of_x](const mg::Tensor& grad) {
    *grad_of_x = grad;
    return mg::Tensor();
  });
  mg::Tensor out = mg::conv2d(x, weight, mg::Tensor(), options);
  mg::Tensor branch = x.detach().clone();
  mg::autograd::record("BranchBackward", branch, {x}, mg::autograd::saved(),
                       [&](const mg::autograd::Node&, const mg::Tensor& grad) {
                         mg::Tensor mine = mg::contiguous_copy(mg::mul(grad, scale), branch_format);
                         branch_data = mine.raw_data();
                         if (keep) result.kept = mine;
                         return std::vector<mg::Tensor>{mine};
                       });
  mg::add(mg::sum(mg::mul(out, upstream)), mg::sum(branch)).backward();
  result.grad_of_x = *grad_of_x;
  result.summed_in_branch_buffer = grad_of_x->defined() && grad_of_x->raw_data() == branch_data;
  return result;
}

// conv2d's input gradient alone, for the same upstream gradient.
inline mg::Tensor conv_input_gradient(const mg::Tensor& x, const mg::Tensor& weight, const mg::Tensor& upstream,
                                      const mg::Conv2dOptions& options) {
  mg::Tensor leaf = x.detach().requires_grad_();
  mg::sum(mg::mul(mg::conv2d(leaf, weight, mg::Tensor(), options), upstream)).backward();
  return leaf.grad();
}

}  // namespace mg_test
