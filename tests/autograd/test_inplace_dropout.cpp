// tests/autograd/test_inplace_dropout.cpp — in-place methods (values, broadcasting,
// versions, the errors that keep autograd honest) and dropout (reproducible masks, drop
// rate, scaling, gradient, and the 1-byte-per-element mask it saves).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "memgrad/autograd/dropout.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "autograd/tensor_checks.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;

using mg_test::contains;
using mg_test::error_message;

TEST_CASE("in-place arithmetic writes into self and bumps its version", "[inplace]") {
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor other = from_vector<float>({10, 20, 30, 40}, {2, 2});
  uint64_t version = x.version();
  CHECK(x.add_(other).is_same(x));
  CHECK(x.to_vector<float>() == std::vector<float>{11, 22, 33, 44});
  CHECK(x.version() == version + 1);
  x.add_(other, -0.5);
  CHECK(x.to_vector<float>() == std::vector<float>{6, 12, 18, 24});
  x.sub_(other);
  CHECK(x.to_vector<float>() == std::vector<float>{-4, -8, -12, -16});
  x.mul_(other);
  CHECK(x.to_vector<float>() == std::vector<float>{-40, -160, -360, -640});
  x.div_(other);
  CHECK(x.to_vector<float>() == std::vector<float>{-4, -8, -12, -16});
  x.add_(1.0);
  x.mul_(-2.0);
  x.div_(4.0);
  CHECK(x.to_vector<float>() == std::vector<float>{1.5, 3.5, 5.5, 7.5});
  x.fill_(7.0);
  CHECK(x.to_vector<float>() == std::vector<float>{7, 7, 7, 7});
  x.zero_();
  CHECK(x.to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  CHECK(x.version() == version + 10);
}

TEST_CASE("in-place ops broadcast the other operand, never self", "[inplace]") {
  Tensor x = zeros({2, 3});
  x.add_(from_vector<float>({1, 2, 3}));
  CHECK(x.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
  x.mul_(from_vector<float>({10, 100}, {2, 1}));
  CHECK(x.to_vector<float>() == std::vector<float>{10, 20, 30, 100, 200, 300});

  Tensor small = zeros({3});
  std::string message = error_message([&] { small.add_(zeros({2, 3})); });
  CHECK(contains(message, "add_"));
  CHECK(contains(message, "[2, 3]"));
  CHECK(contains(message, "[3]"));
  CHECK_THROWS_AS(x.sub_(zeros({3, 2})), Error);
  CHECK_THROWS_AS(x.copy_(zeros({4})), Error);
}

TEST_CASE("in-place ops convert the other operand to self's dtype", "[inplace]") {
  Tensor x = from_vector<double>({1.5, 2.5});
  x.add_(from_vector<int64_t>({1, 2}));
  CHECK(x.to_vector<double>() == std::vector<double>{2.5, 4.5});
  Tensor counts = from_vector<int64_t>({1, 2});
  counts.mul_(from_vector<int32_t>({3, 4}));
  CHECK(counts.to_vector<int64_t>() == std::vector<int64_t>{3, 8});
  // A fractional result cannot land in an integer tensor.
  CHECK_THROWS_AS(counts.add_(from_vector<float>({0.5f, 0.5f})), Error);
  CHECK_THROWS_AS(counts.mul_(0.5), Error);
  CHECK(contains(error_message([&] { counts.div_(2.0); }), "int64"));
}

TEST_CASE("in-place ops write through strided views", "[inplace]") {
  Tensor base = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor transposed = base.t();  // (3, 2), not contiguous
  transposed.add_(from_vector<float>({10, 20}));
  CHECK(base.to_vector<float>() == std::vector<float>{11, 12, 13, 24, 25, 26});
  Tensor column = base.select(1, 1);  // (2), stride 3
  uint64_t version = base.version();
  column.fill_(0.0);
  CHECK(base.to_vector<float>() == std::vector<float>{11, 0, 13, 24, 0, 26});
  CHECK(base.version() == version + 1);  // the version is the storage's, shared by views
  column.copy_(from_vector<int64_t>({7, 8}));
  CHECK(base.to_vector<float>() == std::vector<float>{11, 7, 13, 24, 8, 26});
}

TEST_CASE("an operand overlapping self is read before self is written", "[inplace]") {
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
  x.add_(x);
  CHECK(x.to_vector<float>() == std::vector<float>{2, 4, 6, 8});
  // Row 0 broadcast over both rows: a naive loop would add the already-doubled row 0.
  x.add_(x.select(0, 0));
  CHECK(x.to_vector<float>() == std::vector<float>{4, 8, 8, 12});
  Tensor y = from_vector<float>({1, 2, 3, 4}, {2, 2});
  y.copy_(y.t());
  CHECK(y.to_vector<float>() == std::vector<float>{1, 3, 2, 4});
}

TEST_CASE("copy_ converts dtypes and broadcasts", "[inplace]") {
  Tensor x = zeros({2, 2}, {.dtype = DType::Float64});
  x.copy_(from_vector<int32_t>({3, -4}));
  CHECK(x.to_vector<double>() == std::vector<double>{3, -4, 3, -4});
  Tensor flags = zeros({3}, {.dtype = DType::Bool});
  flags.copy_(from_vector<float>({0.0f, 2.0f, -1.0f}));
  CHECK(flags.to_vector<bool>() == std::vector<bool>{false, true, true});
  // To a device without bytes (simulated): sizes move, no error.
  Tensor remote = zeros({2, 2}, {.device = Device::simulated(0)});
  CHECK_NOTHROW(remote.copy_(x));
}

TEST_CASE("in-place ops refuse to run on tensors autograd depends on", "[inplace]") {
  Tensor weight = from_vector<double>({1.0, 2.0});
  weight.requires_grad_();
  std::string leaf_message = error_message([&] { weight.add_(1.0); });
  CHECK(contains(leaf_message, "leaf tensor that requires grad"));
  CHECK(contains(leaf_message, "add_"));
  CHECK(contains(leaf_message, "NoGradGuard"));
  CHECK_THROWS_AS(weight.mul_(from_vector<double>({2.0, 2.0})), Error);
  CHECK_THROWS_AS(weight.zero_(), Error);

  Tensor hidden = weight * 2.0;
  CHECK(contains(error_message([&] { hidden.mul_(2.0); }), "not differentiable"));
  Tensor plain = zeros({2}, {.dtype = DType::Float64});
  CHECK(contains(error_message([&] { plain.add_(weight); }), "not differentiable"));

  {
    // An optimizer's step: no recording, so the update is allowed.
    NoGradGuard no_grad;
    weight.add_(from_vector<double>({0.5, 0.5}), -2.0);
    plain.copy_(weight);
  }
  CHECK(weight.to_vector<double>() == std::vector<double>{0.0, 1.0});
  CHECK(plain.to_vector<double>() == std::vector<double>{0.0, 1.0});
}

TEST_CASE("modifying a tensor saved for backward is caught by backward", "[inplace]") {
  Tensor x = from_vector<double>({0.0, 1.0});
  x.requires_grad_();
  Tensor y = sigmoid(x);  // saves its output
  {
    NoGradGuard no_grad;
    y.mul_(2.0);
  }
  std::string message = error_message([&] { y.sum().backward(); });
  CHECK(contains(message, "SigmoidBackward"));
  CHECK(contains(message, "version"));
}

TEST_CASE("dropout masks are reproducible from the generator's seed", "[dropout]") {
  Tensor x = ones({1000});
  Generator first(42);
  Generator second(42);
  Tensor a = dropout(x, 0.5, true, &first);
  Tensor b = dropout(x, 0.5, true, &second);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  // The generator moved on: the next mask differs.
  CHECK(dropout(x, 0.5, true, &first).to_vector<float>() != a.to_vector<float>());
  Generator other_seed(43);
  CHECK(dropout(x, 0.5, true, &other_seed).to_vector<float>() != a.to_vector<float>());
}

TEST_CASE("dropout drops a fraction p and scales the rest by 1/(1-p)", "[dropout]") {
  double p = GENERATE(0.1, 0.3, 0.75);
  INFO("p = " << p);
  constexpr int64_t kCount = 100000;
  Generator generator(7);
  Tensor y = dropout(ones({kCount}, {.dtype = DType::Float64}), p, true, &generator);
  int64_t zeros_seen = 0;
  int64_t wrongly_scaled = 0;
  for (double value : y.to_vector<double>()) {
    if (value == 0.0) {
      ++zeros_seen;
    } else if (value != Approx(1.0 / (1.0 - p))) {
      ++wrongly_scaled;
    }
  }
  CHECK(wrongly_scaled == 0);
  CHECK(std::abs(static_cast<double>(zeros_seen) / kCount - p) < 0.01);
}

TEST_CASE("dropout is the identity in eval mode and with p = 0", "[dropout]") {
  Tensor x = from_vector<float>({1, 2, 3});
  CHECK(dropout(x, 0.5, /*training=*/false).is_same(x));
  CHECK(dropout(x, 0.0).is_same(x));
  std::string message = error_message([&] { dropout(x, 1.5); });
  CHECK(contains(message, "dropout"));
  CHECK(contains(message, "1.5"));
  CHECK_THROWS_AS(dropout(x, -0.1), Error);
  CHECK_THROWS_AS(dropout(from_vector<int64_t>({1, 2}), 0.5), Error);

  Tensor leaf = from_vector<double>({1, 2, 3});
  leaf.requires_grad_();
  Tensor dropped = dropout(leaf, 1.0);
  CHECK(dropped.to_vector<double>() == std::vector<double>{0, 0, 0});
  dropped.sum().backward();
  CHECK(leaf.grad().to_vector<double>() == std::vector<double>{0, 0, 0});
}

TEST_CASE("dropout's gradient is the mask times the scale", "[dropout]") {
  Generator generator(3);
  Tensor x = randn({4, 50}, {.dtype = DType::Float64}, &generator);
  x.requires_grad_();
  Tensor y = dropout(x, 0.4, true, &generator);
  Tensor upstream = randn({4, 50}, {.dtype = DType::Float64}, &generator);
  y.backward(upstream);
  std::vector<double> inputs = x.to_vector<double>();
  std::vector<double> outputs = y.to_vector<double>();
  std::vector<double> grads = x.grad().to_vector<double>();
  std::vector<double> upstream_values = upstream.to_vector<double>();
  for (size_t i = 0; i < grads.size(); ++i) {
    bool kept = outputs[i] != 0.0;
    CHECK(grads[i] == Approx(kept ? upstream_values[i] / 0.6 : 0.0));
    if (kept) CHECK(outputs[i] == Approx(inputs[i] / 0.6));
  }
}

TEST_CASE("dropout saves only its 1-byte-per-element mask", "[dropout]") {
  auto activation_bytes = [] {
    return allocator_for(Device::cpu()).stats().category(MemoryCategory::Activation).current;
  };
  int64_t before = activation_bytes();
  Tensor x = zeros({64, 100}, {.requires_grad = true});  // a leaf: TEMPORARY, and not saved
  Tensor y = dropout(x, 0.2);
  CHECK(activation_bytes() - before == 64 * 100);
  y.sum().backward();
  CHECK(activation_bytes() == before);
  {
    NoGradGuard no_grad;
    Tensor evaluated = dropout(x, 0.2);
    CHECK(activation_bytes() == before);
  }
}
