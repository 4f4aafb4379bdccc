// tests/core/test_undefined_tensor.cpp — a default-constructed mg::Tensor (`mg::Tensor loss;`)
// holds nothing: every accessor and op on it throws an mg::Error naming what was asked and
// saying "undefined" (until 2026-12-07, `u.sizes()` dereferenced a null pointer), except
// requires_grad() and grad_fn(), which answer false and null as PyTorch's do; str() prints
// "tensor(undefined)". The README's pattern (declare the loss, assign it in an autocast
// scope, call backward after) is built and trained here too.
#include <catch2/catch.hpp>

#include <string>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/dropout.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/embedding.h"
#include "memgrad/autograd/layer_norm.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/softmax.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/core/tensor.h"
#include "memgrad/core/tensor_index.h"
#include "memgrad/nn/linear.h"
#include "memgrad/optim/sgd.h"

namespace {

using Catch::Matchers::Contains;

// `expression` throws an mg::Error whose text contains `name` and "undefined".
#define CHECK_UNDEFINED_ERROR(expression, name)                                             \
  do {                                                                                      \
    std::string message;                                                                    \
    try {                                                                                   \
      (void)(expression);                                                                   \
    } catch (const mg::Error& error) {                                                      \
      message = error.what();                                                               \
    }                                                                                       \
    INFO(#expression);                                                                      \
    CHECK_THAT(message, Contains(name) && Contains("undefined"));                           \
  } while (false)

}  // namespace

TEST_CASE("every accessor of an undefined tensor throws an mg::Error naming it", "[tensor][undefined]") {
  const mg::Tensor u;
  CHECK_FALSE(u.defined());
  CHECK_UNDEFINED_ERROR(u.sizes(), "sizes");
  CHECK_UNDEFINED_ERROR(u.size(0), "size");
  CHECK_UNDEFINED_ERROR(u.strides(), "strides");
  CHECK_UNDEFINED_ERROR(u.dim(), "dim");
  CHECK_UNDEFINED_ERROR(u.numel(), "numel");
  CHECK_UNDEFINED_ERROR(u.dtype(), "dtype");
  CHECK_UNDEFINED_ERROR(u.device(), "device");
  CHECK_UNDEFINED_ERROR(u.is_contiguous(), "is_contiguous");
  CHECK_UNDEFINED_ERROR(u.item(), "item");
  CHECK_UNDEFINED_ERROR(u.item<float>(), "item");
  CHECK_UNDEFINED_ERROR(u.to_vector<float>(), "to_vector");
  CHECK_UNDEFINED_ERROR(u.data_ptr<float>(), "dtype");
  CHECK_UNDEFINED_ERROR(u.memory_category(), "memory_category");
  CHECK_UNDEFINED_ERROR(u.grad(), "grad");
  CHECK_UNDEFINED_ERROR(u.is_leaf(), "is_leaf");
  CHECK_UNDEFINED_ERROR(u.requires_grad_(), "is_leaf");
  CHECK_UNDEFINED_ERROR(u.backward(), "backward");
  CHECK_UNDEFINED_ERROR(u.detach(), "undefined");
  CHECK_UNDEFINED_ERROR(u.view({1}), "undefined");
  CHECK_UNDEFINED_ERROR(u.index_select(0, mg::zeros({1}, {.dtype = mg::DType::Int64})), "index_select");
  CHECK_UNDEFINED_ERROR(u[0], "undefined");
}

TEST_CASE("requires_grad and grad_fn answer for an undefined tensor, and str() says so", "[tensor][undefined]") {
  const mg::Tensor u;
  CHECK_FALSE(u.requires_grad());
  CHECK(u.grad_fn() == nullptr);
  CHECK(u.str() == "tensor(undefined)");
}

TEST_CASE("ops given an undefined tensor throw an mg::Error naming the op", "[tensor][undefined]") {
  const mg::Tensor u;
  const mg::Tensor x = mg::ones({2, 3});
  CHECK_UNDEFINED_ERROR(u + x, "add");
  CHECK_UNDEFINED_ERROR(x + u, "add");
  CHECK_UNDEFINED_ERROR(u * 2.0, "mul");
  CHECK_UNDEFINED_ERROR(mg::relu(u), "undefined");
  CHECK_UNDEFINED_ERROR(mg::sum(u), "undefined");
  CHECK_UNDEFINED_ERROR(mg::mse_loss(u, x), "undefined");
  CHECK_UNDEFINED_ERROR(x.add_(u), "undefined");
  CHECK_UNDEFINED_ERROR(x.copy_(u), "undefined");
  CHECK_UNDEFINED_ERROR(mg::matmul(x, u), "undefined");
  CHECK_UNDEFINED_ERROR(mg::linear(u, x), "undefined");
  CHECK_UNDEFINED_ERROR(mg::softmax(u, 0), "undefined");
  CHECK_UNDEFINED_ERROR(mg::cat({x, u}), "undefined");
  CHECK_UNDEFINED_ERROR(mg::layer_norm(u, {3}), "undefined");
  CHECK_UNDEFINED_ERROR(mg::conv2d(u, x), "undefined");
  CHECK_UNDEFINED_ERROR(mg::dropout(u, 0.5), "undefined");
  CHECK_UNDEFINED_ERROR(mg::embedding(u, mg::zeros({1}, {.dtype = mg::DType::Int64})), "undefined");
  CHECK_UNDEFINED_ERROR(mg::cross_entropy(u, mg::zeros({2}, {.dtype = mg::DType::Int64})), "undefined");
  CHECK_UNDEFINED_ERROR(u.clone(), "undefined");
  CHECK_UNDEFINED_ERROR(u.to(mg::DType::Float64), "undefined");
  CHECK_UNDEFINED_ERROR(u.contiguous(), "undefined");
  CHECK_UNDEFINED_ERROR(u.sum(), "undefined");
  CHECK_UNDEFINED_ERROR(u.index({0}), "index");
}

TEST_CASE("the README's `mg::Tensor loss` pattern: declared first, assigned in a scope, backward after", "[tensor][undefined]") {
  mg::Generator generator(37);
  mg::nn::Linear model(4, 1, /*has_bias=*/true, &generator);
  mg::optim::SGD optimizer(model.parameters(), {.lr = 0.1});
  const mg::Tensor inputs = mg::randn({16, 4}, {}, &generator);
  const mg::Tensor targets = mg::sum(inputs, {1}, /*keepdim=*/true);  // y = x1 + x2 + x3 + x4

  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 30; ++step) {
    mg::Tensor loss;
    CHECK_UNDEFINED_ERROR(loss.backward(), "backward");  // before it is assigned: an error, not a crash
    {
      mg::amp::AutocastGuard autocast(mg::DType::BFloat16, mg::DeviceType::CPU);
      loss = mg::mse_loss(model(inputs), targets);
    }
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    (step == 0 ? first_loss : last_loss) = loss.item();
  }
  CHECK(last_loss < 0.1 * first_loss);
}
