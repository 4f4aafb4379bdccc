// tests/autograd/test_elementwise.cpp — elementwise ops: gradients against finite
// differences (with broadcasting and scalars), values against hand-computed numbers,
// type promotion, comparisons, error messages, and what each op saves for backward.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "autograd/tensor_checks.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;

namespace {

using mg_test::error_message;

using Inputs = std::vector<Tensor>;

// A float64 leaf of standard normal values that requires grad.
Tensor normal_leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = DType::Float64, .requires_grad = true}, &generator);
}

// A float64 leaf with values in [0.5, 1.5): safe for log, sqrt, division, fractional pow.
Tensor positive_leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  Tensor values = add(rand(sizes, {.dtype = DType::Float64}, &generator), 0.5);
  values.requires_grad_();
  return values;
}

// Values away from 0, where relu and abs have a kink.
Tensor kinked_leaf() {
  Tensor values = from_vector<double>({-1.5, -0.3, 0.2, 0.7, 2.0, -2.2}, {2, 3});
  values.requires_grad_();
  return values;
}

void check_gradcheck(const std::function<Tensor(const Inputs&)>& fn, const Inputs& inputs) {
  GradcheckResult result = gradcheck(fn, inputs);
  INFO(result.message);
  CHECK(result.passed);
}

int64_t activation_bytes() {
  return allocator_for(Device::cpu()).stats().category(MemoryCategory::Activation).current;
}

}  // namespace

TEST_CASE("binary arithmetic gradients match finite differences, with broadcasting", "[elementwise]") {
  using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
  auto [name, op] = GENERATE(table<const char*, BinaryFn>({
      {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}, {"maximum", maximum}, {"minimum", minimum}}));
  auto [a_sizes, b_sizes] = GENERATE(table<Shape, Shape>({
      {{2, 3}, {2, 3}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {4}}, {{4}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}}}));
  INFO(name << " " << a_sizes << " with " << b_sizes);
  Tensor a = normal_leaf(a_sizes, 1);
  // Division needs a divisor away from 0.
  Tensor b = std::string(name) == "div" ? positive_leaf(b_sizes, 2) : normal_leaf(b_sizes, 2);
  check_gradcheck([op = op](const Inputs& in) { return op(in[0], in[1]); }, {a, b});
}

TEST_CASE("gradients flow to only the input that requires them", "[elementwise]") {
  Tensor a = normal_leaf({3, 1}, 3);
  Tensor b = from_vector<double>({0.5, 1.5, -2.0, 3.0}, {1, 4});
  check_gradcheck([](const Inputs& in) { return mul(in[0], in[1]); }, {a, b});
  check_gradcheck([](const Inputs& in) { return div(in[1], in[0]); }, {positive_leaf({3, 1}, 4), b});
}

TEST_CASE("scalar arithmetic and pow gradients match finite differences", "[elementwise]") {
  Tensor x = normal_leaf({2, 3}, 5);
  Tensor positive = positive_leaf({2, 3}, 6);
  check_gradcheck([](const Inputs& in) { return add(in[0], 2.5); }, {x});
  check_gradcheck([](const Inputs& in) { return sub(in[0], 2.5); }, {x});
  check_gradcheck([](const Inputs& in) { return mul(in[0], -3.0); }, {x});
  check_gradcheck([](const Inputs& in) { return div(in[0], 4.0); }, {x});
  check_gradcheck([](const Inputs& in) { return rsub(1.5, in[0]); }, {x});
  check_gradcheck([](const Inputs& in) { return rdiv(2.0, in[0]); }, {positive});
  check_gradcheck([](const Inputs& in) { return 3.0 - in[0] * 2.0 + 1.0 / in[0]; }, {positive});
  check_gradcheck([](const Inputs& in) { return pow(in[0], 2.0); }, {x});
  check_gradcheck([](const Inputs& in) { return in[0].pow(3.0); }, {x});
  check_gradcheck([](const Inputs& in) { return pow(in[0], 0.5); }, {positive});
  check_gradcheck([](const Inputs& in) { return pow(in[0], -1.5); }, {positive});
  check_gradcheck([](const Inputs& in) { return pow(in[0], 0.0); }, {x});
}

TEST_CASE("unary op gradients match finite differences", "[elementwise]") {
  Tensor x = normal_leaf({2, 3}, 7);
  Tensor positive = positive_leaf({2, 3}, 8);
  Tensor kinked = kinked_leaf();
  check_gradcheck([](const Inputs& in) { return neg(in[0]); }, {x});
  check_gradcheck([](const Inputs& in) { return -in[0]; }, {x});
  check_gradcheck([](const Inputs& in) { return exp(in[0]); }, {x});
  check_gradcheck([](const Inputs& in) { return log(in[0]); }, {positive});
  check_gradcheck([](const Inputs& in) { return sqrt(in[0]); }, {positive});
  check_gradcheck([](const Inputs& in) { return abs(in[0]); }, {kinked});
  check_gradcheck([](const Inputs& in) { return relu(in[0]); }, {kinked});
  check_gradcheck([](const Inputs& in) { return sigmoid(in[0]); }, {x});
  check_gradcheck([](const Inputs& in) { return tanh(in[0]); }, {x});
  check_gradcheck([](const Inputs& in) { return gelu(in[0]); }, {x});
  check_gradcheck([](const Inputs& in) { return erf(in[0]); }, {x});
  // Through a chain, where each op's gradient arrives from the next one.
  check_gradcheck([](const Inputs& in) { return in[0].exp().tanh().sigmoid().relu() * in[0].abs(); }, {kinked});
}

TEST_CASE("unary ops compute the textbook values", "[elementwise]") {
  Tensor x = from_vector<double>({-1.0, 0.0, 1.0, 2.0});
  auto values = [](const Tensor& t) { return t.to_vector<double>(); };
  CHECK(values(gelu(x))[2] == Approx(0.8413447460685429));
  CHECK(values(gelu(x))[0] == Approx(-0.15865525393145707));
  CHECK(values(sigmoid(x))[1] == 0.5);
  CHECK(values(sigmoid(x))[3] == Approx(0.8807970779778823));
  CHECK(values(tanh(x))[2] == Approx(0.7615941559557649));
  CHECK(values(relu(x)) == std::vector<double>{0.0, 0.0, 1.0, 2.0});
  CHECK(values(abs(x)) == std::vector<double>{1.0, 0.0, 1.0, 2.0});
  CHECK(values(neg(x)) == std::vector<double>{1.0, -0.0, -1.0, -2.0});
  CHECK(values(exp(x))[2] == Approx(std::exp(1.0)));
  CHECK(values(x.pow(2.0)) == std::vector<double>{1.0, 0.0, 1.0, 4.0});
  CHECK(values(sqrt(from_vector<double>({4.0, 9.0}))) == std::vector<double>{2.0, 3.0});
  CHECK(values(log(from_vector<double>({1.0, std::exp(2.0)})))[1] == Approx(2.0));
  // torch.erf(torch.tensor([-1., 0., 1., 2.], dtype=torch.float64)), and the C library's.
  CHECK(values(erf(x)) == std::vector<double>{std::erf(-1.0), 0.0, std::erf(1.0), std::erf(2.0)});
  CHECK(values(erf(x))[2] == Approx(0.8427007929497149).epsilon(1e-15));
  CHECK_THROWS_WITH(erf(from_vector<int64_t>({1})), Catch::Contains("erf: expected a floating-point tensor"));
}

TEST_CASE("activation gradients have the textbook values", "[elementwise]") {
  Tensor x = from_vector<double>({-1.0, 0.0, 1.0});
  x.requires_grad_();
  sigmoid(x).sum().backward();
  CHECK(x.grad().to_vector<double>()[1] == 0.25);
  x.set_grad(Tensor());
  gelu(x).sum().backward();
  // d/dx x*Phi(x) at 1 = Phi(1) + phi(1)
  CHECK(x.grad().to_vector<double>()[2] == Approx(0.8413447460685429 + 0.24197072451914337));
  x.set_grad(Tensor());
  relu(x).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0.0, 0.0, 1.0});
}

TEST_CASE("binary ops broadcast values", "[elementwise]") {
  Tensor column = from_vector<float>({1, 2, 3}, {3, 1});
  Tensor row = from_vector<float>({10, 20}, {1, 2});
  Tensor sum = column + row;
  CHECK(sum.sizes() == Shape{3, 2});
  CHECK(sum.to_vector<float>() == std::vector<float>{11, 21, 12, 22, 13, 23});
  CHECK((row - column).to_vector<float>() == std::vector<float>{9, 19, 8, 18, 7, 17});
  CHECK((column * row).to_vector<float>() == std::vector<float>{10, 20, 20, 40, 30, 60});
  CHECK((row / column).to_vector<float>()[2] == 5.0f);
  CHECK(maximum(column, from_vector<float>({2})).to_vector<float>() == std::vector<float>{2, 2, 3});
  CHECK(minimum(column, from_vector<float>({2})).to_vector<float>() == std::vector<float>{1, 2, 2});
  CHECK((10.0 - column).to_vector<float>() == std::vector<float>{9, 8, 7});
  CHECK((6.0 / column).to_vector<float>() == std::vector<float>{6, 3, 2});
}

TEST_CASE("maximum and minimum split the gradient evenly at ties", "[elementwise]") {
  Tensor a = from_vector<double>({1.0, 2.0, 3.0});
  Tensor b = from_vector<double>({1.0, 0.0, 5.0});
  a.requires_grad_();
  b.requires_grad_();
  maximum(a, b).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0.5, 1.0, 0.0});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{0.5, 0.0, 1.0});
  a.set_grad(Tensor());
  b.set_grad(Tensor());
  minimum(a, b).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0.5, 0.0, 1.0});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{0.5, 1.0, 0.0});
}

TEST_CASE("binary ops promote dtypes like PyTorch", "[elementwise]") {
  Tensor ints = from_vector<int64_t>({1, 2, 3});
  Tensor floats = from_vector<float>({0.5f, 0.5f, 0.5f});
  Tensor sum = ints + floats;
  CHECK(sum.dtype() == DType::Float32);
  CHECK(sum.to_vector<float>() == std::vector<float>{1.5f, 2.5f, 3.5f});
  CHECK((ints + ints).dtype() == DType::Int64);
  CHECK((from_vector<int32_t>({1}) + ints).dtype() == DType::Int64);
  CHECK((floats + from_vector<double>({1.0})).dtype() == DType::Float64);

  // Integer / integer is true division in float32.
  Tensor quotient = div(from_vector<int64_t>({1, 7, -3}), from_vector<int64_t>({2, 2, 2}));
  CHECK(quotient.dtype() == DType::Float32);
  CHECK(quotient.to_vector<float>() == std::vector<float>{0.5f, 3.5f, -1.5f});

  // With a scalar the tensor's dtype stays, unless the scalar is fractional or it divides.
  CHECK((ints * 2.0).dtype() == DType::Int64);
  CHECK((ints * 2.0).to_vector<int64_t>() == std::vector<int64_t>{2, 4, 6});
  CHECK((ints * 2.5).dtype() == DType::Float32);
  CHECK((ints * 2.5).to_vector<float>() == std::vector<float>{2.5f, 5.0f, 7.5f});
  CHECK((ints / 2.0).to_vector<float>() == std::vector<float>{0.5f, 1.0f, 1.5f});
  CHECK((floats * 2.0).dtype() == DType::Float32);
  CHECK((1.0 / ints).to_vector<float>()[1] == 0.5f);
  CHECK(neg(ints).to_vector<int64_t>() == std::vector<int64_t>{-1, -2, -3});
  CHECK(relu(from_vector<int32_t>({-2, 3})).to_vector<int32_t>() == std::vector<int32_t>{0, 3});
}

TEST_CASE("a promoted input's gradient comes back in its own dtype", "[elementwise]") {
  Tensor single = from_vector<float>({1.0f, 2.0f});
  Tensor wide = from_vector<double>({3.0, 4.0});
  single.requires_grad_();
  wide.requires_grad_();
  Tensor product = single * wide;
  CHECK(product.dtype() == DType::Float64);
  product.sum().backward();
  REQUIRE(single.grad().defined());
  CHECK(single.grad().dtype() == DType::Float32);
  CHECK(single.grad().to_vector<float>() == std::vector<float>{3.0f, 4.0f});
  CHECK(wide.grad().to_vector<double>() == std::vector<double>{1.0, 2.0});
}

TEST_CASE("comparisons give bool tensors and record nothing", "[elementwise]") {
  Tensor a = from_vector<float>({1, 2, 3});
  Tensor b = from_vector<float>({3, 2, 1});
  a.requires_grad_();
  Tensor equal = eq(a, b);
  CHECK(equal.dtype() == DType::Bool);
  CHECK_FALSE(equal.requires_grad());
  CHECK(equal.to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(ne(a, b).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(lt(a, b).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(le(a, b).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK(gt(a, b).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(ge(a, b).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(gt(a, 1.5).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(eq(a, 2.0).to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(le(from_vector<int64_t>({1, 2}), 1.5).to_vector<bool>() == std::vector<bool>{true, false});
  // Broadcasting and promotion: int64 (2, 1) against float32 (3).
  Tensor mixed = lt(from_vector<int64_t>({1, 3}, {2, 1}), from_vector<float>({0.5f, 1.5f, 3.5f}));
  CHECK(mixed.sizes() == Shape{2, 3});
  CHECK(mixed.to_vector<bool>() == std::vector<bool>{false, true, true, false, false, true});
}

TEST_CASE("shape and dtype mistakes are reported with the shapes involved", "[elementwise]") {
  Tensor a = zeros({2, 3});
  Tensor b = zeros({4});
  std::string message = error_message([&] { add(a, b); });
  CHECK(message.find("add") != std::string::npos);
  CHECK(message.find("[2, 3]") != std::string::npos);
  CHECK(message.find("[4]") != std::string::npos);
  CHECK_THROWS_AS(mul(a, zeros({3, 2})), Error);
  CHECK_THROWS_AS(maximum(a, zeros({3, 2})), Error);
  CHECK_THROWS_AS(lt(a, zeros({5})), Error);

  std::string dtype_message = error_message([] { exp(from_vector<int64_t>({1, 2})); });
  CHECK(dtype_message.find("exp") != std::string::npos);
  CHECK(dtype_message.find("int64") != std::string::npos);
  CHECK_THROWS_AS(sigmoid(from_vector<int32_t>({1})), Error);
  CHECK_THROWS_AS(gelu(from_vector<bool>({true})), Error);
}

TEST_CASE("ops save only what their backward needs", "[elementwise]") {
  Tensor frozen = normal_leaf({32, 16}, 9).detach();
  Tensor weight = normal_leaf({32, 16}, 10);
  int64_t before = activation_bytes();
  {
    // The weight's gradient needs the frozen input; nothing needs the weight.
    Tensor product = mul(frozen, weight);
    CHECK(activation_bytes() - before == 32 * 16 * 8);
  }
  CHECK(activation_bytes() == before);
  {
    // relu, sigmoid and tanh keep their output, not their input; add keeps nothing.
    Tensor hidden = relu(add(weight, 1.0));
    CHECK(activation_bytes() - before == 32 * 16 * 8);
    Tensor squashed = tanh(sigmoid(hidden));
    CHECK(activation_bytes() - before == 3 * 32 * 16 * 8);
  }
  CHECK(activation_bytes() == before);
}

TEST_CASE("sum_to_size reduces a broadcast gradient to the input's shape", "[elementwise]") {
  Tensor grad = ones({2, 3, 4});
  CHECK(sum_to_size(grad, {2, 3, 4}).is_same(grad));
  Tensor to_row = sum_to_size(grad, {4});
  CHECK(to_row.sizes() == Shape{4});
  CHECK(to_row.to_vector<float>() == std::vector<float>{6, 6, 6, 6});
  Tensor to_column = sum_to_size(grad, {3, 1});
  CHECK(to_column.sizes() == Shape{3, 1});
  CHECK(to_column.to_vector<float>() == std::vector<float>{8, 8, 8});
  Tensor to_scalar = sum_to_size(grad, {});
  CHECK(to_scalar.sizes() == Shape{});
  CHECK(to_scalar.item<float>() == 24.0f);
}

TEST_CASE("elementwise results on channels_last inputs are channels_last, with NCHW's values", "[elementwise]") {
  const MemoryFormat kLast = MemoryFormat::ChannelsLast;
  Tensor x = normal_leaf({2, 3, 4, 5}, 60).detach(), y = normal_leaf({2, 3, 4, 5}, 61).detach();
  Tensor bias = normal_leaf({1, 3, 1, 1}, 62).detach();
  Tensor x_last = x.contiguous(kLast), y_last = y.contiguous(kLast);
  REQUIRE(!x_last.is_contiguous());
  auto same_values = [](const Tensor& actual, const Tensor& expected) {
    std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
    REQUIRE(a.size() == e.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(e[i]).margin(1e-15));
  };
  struct Check {
    const char* what;
    Tensor actual, expected;
  };
  for (const Check& check : {
           Check{"x + y", add(x_last, y_last), add(x, y)},
           Check{"x * bias (broadcast)", mul(x_last, bias), mul(x, bias)},
           Check{"bias - x", sub(bias, x_last), sub(bias, x)},
           Check{"x * 2", mul(x_last, 2.0), mul(x, 2.0)},
           Check{"1 / x", rdiv(1.0, x_last), rdiv(1.0, x)},
           Check{"relu", relu(x_last), relu(x)},
           Check{"exp", exp(x_last), exp(x)},
           Check{"x > y", gt(x_last, y_last), gt(x, y)},
           Check{"x + y (NCHW y: the first input decides)", add(x_last, y), add(x, y)},
       }) {
    INFO(check.what);
    CHECK(is_contiguous_in(check.actual, kLast));
    same_values(check.actual, check.expected);
  }
  // An NCHW first operand keeps the result NCHW (PyTorch's rule).
  CHECK(add(y, x_last).is_contiguous());
  same_values(add(y, x_last), add(y, x));

  SECTION("gradients: relu's follows the saved output even for a broadcast incoming gradient") {
    Tensor leaf = x_last.detach().requires_grad_();
    Tensor out = relu(leaf);
    mean(out).backward();  // mean's gradient is a stride-0 view
    REQUIRE(leaf.grad().defined());
    Tensor expected_leaf = x.detach().requires_grad_();
    mean(relu(expected_leaf)).backward();
    same_values(leaf.grad(), expected_leaf.grad());
  }
  SECTION("in place on a channels_last tensor") {
    NoGradGuard no_grad;
    Tensor target = contiguous_copy(x, kLast);
    target.add_(y_last).mul_(bias);
    CHECK(is_contiguous_in(target, kLast));
    same_values(target, mul(add(x, y), bias));
  }
}

TEST_CASE("add_relu is relu(a + b) in one node that saves only its output", "[elementwise]") {
  // Sums away from 0, where relu has its kink; b broadcasts over a's rows.
  Tensor a = from_vector<double>({-1.5, -0.3, 0.2, 0.7, 2.0, -2.2}, {2, 3}).requires_grad_();
  Tensor b = from_vector<double>({0.4, -0.6, 1.1}, {3}).requires_grad_();
  Tensor fused = add_relu(a, b);
  Tensor expected = relu(add(a, b));
  CHECK(fused.to_vector<double>() == expected.to_vector<double>());
  REQUIRE(fused.grad_fn() != nullptr);
  CHECK(std::string(fused.grad_fn()->name()) == "AddReluBackward");
  check_gradcheck([](const Inputs& in) { return add_relu(in[0], in[1]); }, {a, b});
  // Mixed dtypes promote as add does, and the gradient comes back in each input's dtype.
  Tensor narrow = from_vector<float>({1.0f, -3.0f, 0.5f}, {3}).requires_grad_();
  Tensor mixed = add_relu(a, narrow);
  CHECK(mixed.dtype() == DType::Float64);
  mixed.sum().backward();
  CHECK(narrow.grad().dtype() == DType::Float32);
  CHECK(narrow.grad().to_vector<float>() == std::vector<float>{1.0f, 0.0f, 1.0f});

  int64_t before = activation_bytes();
  {
    Tensor frozen = normal_leaf({32, 16}, 11).detach(), weight = normal_leaf({32, 16}, 12);
    Tensor out = add_relu(weight, frozen);
    CHECK(activation_bytes() - before == 32 * 16 * 8);  // the output alone, which relu saves too
  }
  CHECK(activation_bytes() == before);
}

// GELU's tanh approximation (GPT-2's "gelu_new"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
TEST_CASE("gelu with the tanh approximation: PyTorch's values, gradients, and what it saves", "[elementwise]") {
  auto formula = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::acos(-1.0)) * (x + 0.044715 * x * x * x)));
  };
  Tensor x = from_vector<double>({-1.0, 0.0, 1.0, 2.5, -3.0, 0.3});
  std::vector<double> values = gelu(x, GeluApproximate::Tanh).to_vector<double>();
  // torch.nn.functional.gelu(torch.tensor([-1., 1.], dtype=torch.float64), approximate='tanh')
  CHECK(values[0] == Approx(-0.15880800939172324).epsilon(1e-14));
  CHECK(values[2] == Approx(0.8411919906082768).epsilon(1e-14));
  CHECK(values[1] == 0.0);
  for (size_t i = 0; i < values.size(); ++i) CHECK(values[i] == Approx(formula(x.to_vector<double>()[i])).epsilon(1e-14));
  // It is an approximation: close to the exact (erf) form, not equal.
  CHECK(values[2] != gelu(x).to_vector<double>()[2]);
  CHECK(values[2] == Approx(gelu(x).to_vector<double>()[2]).margin(1e-3));

  check_gradcheck([](const Inputs& in) { return gelu(in[0], GeluApproximate::Tanh); }, {normal_leaf({3, 4}, 13)});
  check_gradcheck([](const Inputs& in) { return gelu(in[0], GeluApproximate::Tanh); }, {kinked_leaf()});

  // d/dx at 1 against a central difference of the formula itself.
  Tensor one = from_vector<double>({1.0}).requires_grad_();
  gelu(one, GeluApproximate::Tanh).sum().backward();
  const double step = 1e-6;
  CHECK(one.grad().to_vector<double>()[0] == Approx((formula(1 + step) - formula(1 - step)) / (2 * step)).epsilon(1e-8));

  // One node that keeps the input, as the exact form's does; float32 stays float32.
  Tensor leaf = normal_leaf({32, 16}, 14);
  int64_t before = activation_bytes();
  {
    Tensor out = gelu(leaf, GeluApproximate::Tanh);
    REQUIRE(out.grad_fn() != nullptr);
    CHECK(std::string(out.grad_fn()->name()) == "GeluTanhBackward");
    CHECK(activation_bytes() - before == 32 * 16 * 8);
  }
  CHECK(activation_bytes() == before);
  Tensor narrow = from_vector<float>({1.0f, -1.0f});
  Tensor narrow_out = gelu(narrow, GeluApproximate::Tanh);
  CHECK(narrow_out.dtype() == DType::Float32);
  CHECK(narrow_out.to_vector<float>()[0] == Approx(0.8411919906082768).epsilon(1e-6));
  CHECK_THROWS_WITH(gelu(from_vector<int64_t>({1}), GeluApproximate::Tanh),
                    Catch::Contains("gelu: expected a floating-point tensor, got int64"));
}
