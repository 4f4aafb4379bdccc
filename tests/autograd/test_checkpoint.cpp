// tests/autograd/test_checkpoint.cpp — mg::checkpoint against the same computation run
// without it: equal gradients (an MLP, with dropout, several inputs and outputs, an input
// that needs no gradient, nested checkpoints), the generator left where an unchecked run
// leaves it, less activation memory, and the errors (second backward, captured non-leaf,
// input changed in place, a function that changes its outputs).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/dropout.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/reduce.h"
#include "autograd/tensor_checks.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"

using namespace mg;

namespace {

using mg_test::error_message;
using mg_test::contains;
using mg_test::max_abs_difference;

// A two-layer MLP's parameters as leaves; the same seed gives the same values, so the
// checkpointed and the plain run each get their own copy and their own .grad.
struct Mlp {
  Tensor w1, b1, w2, b2;

  explicit Mlp(uint64_t seed) {
    Generator generator(seed);
    TensorOptions parameter{.category = MemoryCategory::Parameter};
    w1 = randn({32, 16}, parameter, &generator).requires_grad_();
    b1 = randn({32}, parameter, &generator).requires_grad_();
    w2 = randn({8, 32}, parameter, &generator).requires_grad_();
    b2 = randn({8}, parameter, &generator).requires_grad_();
  }
  // (N, 16) -> (N, 8); dropout (from the default generator) between the layers when p > 0.
  Tensor forward(const Tensor& x, double p = 0.0) const {
    Tensor hidden = relu(linear(x, w1, b1));
    if (p > 0.0) hidden = dropout(hidden, p);
    return tanh(linear(hidden, w2, b2));
  }
  void check_same_grads(const Mlp& other) const {
    CHECK(max_abs_difference(w1.grad(), other.w1.grad()) < 1e-6);
    CHECK(max_abs_difference(b1.grad(), other.b1.grad()) < 1e-6);
    CHECK(max_abs_difference(w2.grad(), other.w2.grad()) < 1e-6);
    CHECK(max_abs_difference(b2.grad(), other.b2.grad()) < 1e-6);
  }
};

Tensor input_leaf(uint64_t seed, Shape sizes = {4, 16}) {
  Generator generator(seed);
  return randn(sizes, {}, &generator).requires_grad_();
}

int64_t activation_bytes() { return memory::snapshot().category(MemoryCategory::Activation).current; }

}  // namespace

TEST_CASE("checkpoint gives an MLP the gradients of the unchecked run", "[checkpoint]") {
  Mlp plain(1), checked(1);
  Tensor x_plain = input_leaf(2), x_checked = input_leaf(2);

  Tensor y_plain = plain.forward(x_plain);
  sum(mul(y_plain, y_plain)).backward();
  Tensor y_checked = checkpoint([&](const Tensor& x) { return checked.forward(x); }, x_checked);
  CHECK(y_checked.grad_fn()->name() == std::string("CheckpointBackward"));
  CHECK(max_abs_difference(y_plain, y_checked) == 0.0);
  sum(mul(y_checked, y_checked)).backward();

  CHECK(max_abs_difference(x_plain.grad(), x_checked.grad()) < 1e-6);
  plain.check_same_grads(checked);
}

TEST_CASE("checkpoint saves only its inputs: the MLP's hidden activations are not kept", "[checkpoint]") {
  Mlp mlp(1);
  Tensor x = mul(input_leaf(2, {64, 16}), 1.0);  // an intermediate result: saving it counts as ACTIVATION
  int64_t before = activation_bytes();
  Tensor plain = mlp.forward(x);
  int64_t plain_bytes = activation_bytes() - before;
  plain = Tensor();  // frees that graph
  REQUIRE(activation_bytes() == before);
  Tensor checked = checkpoint([&](const Tensor& input) { return mlp.forward(input); }, x);
  int64_t checked_bytes = activation_bytes() - before;
  CHECK(checked_bytes == 64 * 16 * 4);            // x alone
  CHECK(plain_bytes == 64 * (16 + 32 + 8) * 4);    // x, relu's output (the second layer's input), tanh's output
}

TEST_CASE("checkpoint replays dropout exactly and leaves the generator where an unchecked run does",
          "[checkpoint]") {
  auto run = [](bool use_checkpoint) {
    manual_seed(123);
    Mlp mlp(1);
    Tensor x = input_leaf(2);
    auto fn = [&](const Tensor& input) { return mlp.forward(input, 0.5); };
    Tensor y = use_checkpoint ? checkpoint(fn, x) : fn(x);
    y = dropout(y, 0.3);  // after the checkpoint: must draw what the unchecked run draws
    sum(mul(y, y)).backward();
    return std::make_tuple(mlp, x, y, default_generator().state().offset);
  };
  auto [plain, x_plain, y_plain, offset_plain] = run(false);
  auto [checked, x_checked, y_checked, offset_checked] = run(true);
  CHECK(max_abs_difference(y_plain, y_checked) == 0.0);
  CHECK(offset_checked == offset_plain);
  CHECK(max_abs_difference(x_plain.grad(), x_checked.grad()) < 1e-6);
  checked.check_same_grads(plain);
}

TEST_CASE("checkpoint takes several inputs and outputs, some needing no gradient", "[checkpoint]") {
  // fn({a, b, c, undefined}) = {a * b + c, relu(b), argmax(a)}; c is a constant.
  auto fn = [](const std::vector<Tensor>& inputs) {
    REQUIRE_FALSE(inputs[3].defined());
    return std::vector<Tensor>{add(mul(inputs[0], inputs[1]), inputs[2]), relu(inputs[1]), argmax(inputs[0], 1)};
  };
  auto leaves = [] { return std::make_tuple(input_leaf(1), input_leaf(2), input_leaf(3).detach()); };
  auto [a_plain, b_plain, c_plain] = leaves();
  auto [a_checked, b_checked, c_checked] = leaves();

  std::vector<Tensor> plain = fn({a_plain, b_plain, c_plain, Tensor()});
  std::vector<Tensor> checked = checkpoint(fn, {a_checked, b_checked, c_checked, Tensor()});
  REQUIRE(checked.size() == 3);
  CHECK(checked[0].requires_grad());
  CHECK(checked[1].grad_fn() == checked[0].grad_fn());
  CHECK_FALSE(checked[2].requires_grad());  // integer indices carry no gradient
  CHECK(checked[2].to_vector<int64_t>() == plain[2].to_vector<int64_t>());

  // Both outputs reach b; the gradients add up.
  add(sum(mul(plain[0], plain[0])), sum(plain[1])).backward();
  add(sum(mul(checked[0], checked[0])), sum(checked[1])).backward();
  CHECK(max_abs_difference(a_plain.grad(), a_checked.grad()) < 1e-6);
  CHECK(max_abs_difference(b_plain.grad(), b_checked.grad()) < 1e-6);
  CHECK_FALSE(c_checked.grad().defined());

  // An output that backward never reaches contributes nothing.
  Tensor a = input_leaf(1), b = input_leaf(2);
  sum(checkpoint(fn, {a, b, c_checked, Tensor()})[1]).backward();
  CHECK_FALSE(a.grad().defined());
  CHECK(max_abs_difference(b.grad(), gt(b, 0.0).to(DType::Float32)) == 0.0);
}

TEST_CASE("parameters used inside checkpoint get gradients when no input requires grad", "[checkpoint]") {
  Mlp plain(1), checked(1);
  Tensor x = input_leaf(2).detach();  // data, as a network's first segment sees it
  sum(plain.forward(x)).backward();
  Tensor y = checkpoint([&](const Tensor& input) { return checked.forward(input); }, x);
  CHECK(y.requires_grad());
  sum(y).backward();
  checked.check_same_grads(plain);
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("checkpoints nest, with dropout inside both", "[checkpoint]") {
  auto run = [](bool use_checkpoint) {
    manual_seed(7);
    Mlp outer(1), inner(3);
    Tensor x = input_leaf(2, {4, 8});
    auto inner_fn = [&](const Tensor& input) { return inner.forward(input, 0.25); };
    auto outer_fn = [&](const Tensor& input) {
      Tensor widened = linear(dropout(input, 0.5), ones({16, 8}));  // (4, 8) -> (4, 16)
      Tensor middle = use_checkpoint ? checkpoint(inner_fn, widened) : inner_fn(widened);
      return outer.forward(linear(middle, ones({16, 8})), 0.5);
    };
    Tensor y = use_checkpoint ? checkpoint(outer_fn, x) : outer_fn(x);
    sum(mul(y, y)).backward();
    return std::make_tuple(outer, inner, x, default_generator().state().offset);
  };
  auto [outer_plain, inner_plain, x_plain, offset_plain] = run(false);
  auto [outer_checked, inner_checked, x_checked, offset_checked] = run(true);
  CHECK(offset_checked == offset_plain);
  CHECK(max_abs_difference(x_plain.grad(), x_checked.grad()) < 1e-6);
  outer_checked.check_same_grads(outer_plain);
  inner_checked.check_same_grads(inner_plain);
}

TEST_CASE("is_recomputing() is true only while checkpoint runs its function again", "[checkpoint]") {
  std::vector<bool> seen;
  Tensor x = input_leaf(1);
  Tensor y = checkpoint(
      [&](const Tensor& input) {
        seen.push_back(autograd::is_recomputing());
        seen.push_back(GradMode::is_enabled());
        return relu(input);
      },
      x);
  CHECK_FALSE(autograd::is_recomputing());
  sum(y).backward();
  CHECK(seen == std::vector<bool>{false, false, true, true});  // forward: no grad; recompute: grad on
  CHECK_FALSE(autograd::is_recomputing());
}

TEST_CASE("with grad mode off, checkpoint just runs the function", "[checkpoint]") {
  Tensor x = input_leaf(1);
  int calls = 0;
  NoGradGuard no_grad;
  Tensor y = checkpoint(
      [&](const Tensor& input) {
        ++calls;
        return relu(input);
      },
      x);
  CHECK(calls == 1);
  CHECK_FALSE(y.requires_grad());
  CHECK(max_abs_difference(y, relu(x)) == 0.0);
}

TEST_CASE("a second backward through a checkpoint names CheckpointBackward and retain_graph allows it",
          "[checkpoint]") {
  Mlp mlp(1);
  Tensor x = input_leaf(2);
  Tensor loss = sum(checkpoint([&](const Tensor& input) { return mlp.forward(input); }, x));
  loss.backward({}, /*retain_graph=*/true);
  Tensor first = x.grad().clone();
  loss.backward();
  CHECK(max_abs_difference(x.grad(), mul(first, 2.0)) < 1e-6);
  std::string message = error_message([&] { loss.backward(); });
  CHECK(contains(message, "CheckpointBackward"));
  CHECK(contains(message, "second time"));
}

TEST_CASE("checkpoint errors: captured non-leaf, input changed in place, outputs that change", "[checkpoint]") {
  Tensor x = input_leaf(1);
  Tensor outside = mul(x, 2.0);  // requires grad and has history: must be an input
  Tensor y = checkpoint([&](const Tensor& input) { return mul(input, outside); }, x);
  std::string message = error_message([&] { sum(y).backward(); });
  CHECK(contains(message, "pass that tensor to checkpoint as an input"));
  CHECK(contains(message, "MulBackward"));

  Tensor z = mul(input_leaf(1), 1.0);
  Tensor out = checkpoint([](const Tensor& input) { return relu(input); }, z);
  {
    NoGradGuard no_grad;
    z.add_(1.0);
  }
  message = error_message([&] { sum(out).backward(); });
  CHECK(contains(message, "CheckpointBackward"));
  CHECK(contains(message, "in-place"));

  int calls = 0;
  Tensor w = input_leaf(1);
  Tensor changing = checkpoint(
      [&](const Tensor& input) { return ++calls == 1 ? relu(input) : sum(input, {1}); }, w);
  message = error_message([&] { sum(changing).backward(); });
  CHECK(contains(message, "different outputs when recomputed"));
  CHECK(contains(message, "[4, 16]"));
}

TEST_CASE("checkpoint's function may return its input unchanged", "[checkpoint]") {
  Tensor x = input_leaf(1);
  std::vector<Tensor> outputs =
      checkpoint([](const std::vector<Tensor>& inputs) { return std::vector<Tensor>{inputs[0], mul(inputs[0], 3.0)}; },
                 {x});
  CHECK(x.is_leaf());  // the returned handle is a new one: x keeps its (empty) history
  CHECK_FALSE(outputs[0].is_leaf());
  add(sum(outputs[0]), sum(outputs[1])).backward();
  CHECK(max_abs_difference(x.grad(), full_like(x, 4.0)) == 0.0);
}
