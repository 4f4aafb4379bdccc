// tests/autograd/test_reduce.cpp — sum, mean, max/amax, max(dim) and argmax: values
// against hand-computed numbers, dtypes, shapes with and without keepdim, what each saves
// for backward, errors, and gradcheck (also through non-contiguous inputs).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;
using Catch::Contains;

namespace {

Tensor leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = DType::Float64, .requires_grad = true}, &generator);
}

int64_t activation_bytes() {
  return allocator_for(Device::cpu()).stats().category(MemoryCategory::Activation).current;
}

void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                     const std::vector<Tensor>& inputs) {
  GradcheckResult result = gradcheck(fn, inputs);
  INFO(result.message);
  CHECK(result.passed);
}

std::vector<double> values(const Tensor& x) { return x.to_vector<double>(); }

}  // namespace

TEST_CASE("sum over all or some dims, with and without keepdim", "[reduce]") {
  Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor total = x.sum();
  CHECK(total.dim() == 0);
  CHECK(total.item() == 21.0);
  CHECK(values(x.sum({0})) == std::vector<double>{5, 7, 9});
  Tensor rows = x.sum({1}, /*keepdim=*/true);
  CHECK(rows.sizes() == Shape{2, 1});
  CHECK(values(rows) == std::vector<double>{6, 15});
  CHECK(x.sum({-1, 0}).sizes() == Shape{});
  CHECK(x.sum({-1, 0}, true).sizes() == Shape{1, 1});
  // Without keepdim the result is a view of the one keepdim-form allocation.
  Tensor columns = x.sum({0});
  CHECK(columns.storage()->nbytes() == columns.nbytes());

  REQUIRE_THROWS_WITH(x.sum({1, -1}), Contains("dimension 1 appears more than once") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(x.sum({2}), Contains("dimension 2 is out of range"));
}

TEST_CASE("sum of integers and bools gives int64 without a graph and mean needs floats", "[reduce]") {
  Tensor integers = from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  Tensor summed = integers.sum({0});
  CHECK(summed.dtype() == DType::Int64);
  CHECK(summed.to_vector<int64_t>() == std::vector<int64_t>{4, 6});
  CHECK_FALSE(summed.requires_grad());
  Tensor flags = from_vector<bool>({true, false, true, true});
  CHECK(flags.sum().dtype() == DType::Int64);
  CHECK(flags.sum().item<int64_t>() == 3);
  CHECK(zeros({3}, {.dtype = DType::Float32}).sum().dtype() == DType::Float32);
  REQUIRE_THROWS_WITH(integers.mean(), Contains("mean") && Contains("int32") && Contains("[2, 2]"));
}

TEST_CASE("mean divides by the number of elements reduced", "[reduce]") {
  Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(x.mean().item() == 3.5);
  CHECK(values(x.mean({0})) == std::vector<double>{2.5, 3.5, 4.5});
  Tensor rows = x.mean({1}, true);
  CHECK(rows.sizes() == Shape{2, 1});
  CHECK(values(rows) == std::vector<double>{2, 5});
}

TEST_CASE("reducing over a dim of size 0 gives the identity (sum 0, mean NaN)", "[reduce]") {
  Tensor x = zeros({3, 0}, {.dtype = DType::Float64});
  Tensor row_sums = x.sum({1});
  CHECK(row_sums.sizes() == Shape{3});
  CHECK(values(row_sums) == std::vector<double>{0, 0, 0});
  CHECK(x.sum().item() == 0.0);
  CHECK(x.sum({0}).sizes() == Shape{0});
  CHECK(std::isnan(x.mean().item()));
  REQUIRE_THROWS_WITH(x.amax({1}), Contains("dimension 1 of size 0") && Contains("[3, 0]"));
  REQUIRE_THROWS_WITH(x.argmax(1), Contains("dimension 1 of size 0"));
  REQUIRE_THROWS_WITH(max(x), Contains("max: cannot reduce over dimension 1 of size 0"));
}

TEST_CASE("the gradient of sum is expanded without bytes and the leaf gets its own copy", "[reduce]") {
  Tensor x = zeros({2, 3}, {.dtype = DType::Float64, .requires_grad = true});
  x.sum({1}).sum().backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().is_contiguous());
  CHECK(x.grad().storage()->nbytes() == x.grad().nbytes());
  CHECK(values(x.grad()) == std::vector<double>{1, 1, 1, 1, 1, 1});
  Tensor y = zeros({4}, {.dtype = DType::Float64, .requires_grad = true});
  y.mean().backward();
  CHECK(values(y.grad()) == std::vector<double>{0.25, 0.25, 0.25, 0.25});
}

TEST_CASE("max and amax share the gradient evenly among tied maxima", "[reduce]") {
  Tensor x = from_vector<double>({1, 3, 3, 2});
  x.requires_grad_();
  Tensor top = max(x);
  CHECK(top.dim() == 0);
  CHECK(top.item() == 3.0);
  CHECK(std::string(top.grad_fn()->name()) == "MaxBackward");
  top.backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 0.5, 0.5, 0});

  Tensor m = from_vector<double>({1, 5, 5, 2, 0, 1}, {2, 3});
  m.requires_grad_();
  Tensor row_max = m.amax({1});
  CHECK(values(row_max) == std::vector<double>{5, 2});
  CHECK(m.amax({1}, true).sizes() == Shape{2, 1});
  CHECK(values(m.amax({0, 1})) == std::vector<double>{5});
  row_max.sum().backward();
  CHECK(values(m.grad()) == std::vector<double>{0, 0.5, 0.5, 1, 0, 0});

  Tensor integers = from_vector<int64_t>({4, -1, 9});
  CHECK(max(integers).dtype() == DType::Int64);
  CHECK(max(integers).item<int64_t>() == 9);
}

TEST_CASE("max along a dim gives values and the first index and the gradient goes to it", "[reduce]") {
  Tensor x = from_vector<double>({1, 5, 2, 7, 0, 7}, {2, 3});
  x.requires_grad_();
  auto [values_row, indices] = max(x, 1);
  CHECK(values(values_row) == std::vector<double>{5, 7});
  CHECK(indices.dtype() == DType::Int64);
  CHECK(indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK_FALSE(indices.requires_grad());
  values_row.sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 1, 0, 1, 0, 0});

  auto [column_values, column_indices] = max(x, 0, /*keepdim=*/true);
  CHECK(column_values.sizes() == Shape{1, 3});
  CHECK(column_indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
}

TEST_CASE("argmax gives int64 indices and records no graph", "[reduce]") {
  Tensor x = leaf({3, 4}, 1);
  Tensor indices = x.argmax(1);
  CHECK(indices.dtype() == DType::Int64);
  CHECK(indices.sizes() == Shape{3});
  CHECK_FALSE(indices.requires_grad());
  CHECK(x.argmax(0, true).sizes() == Shape{1, 4});
  Tensor known = from_vector<float>({0.5f, -1.0f, 3.0f, 2.0f, 8.0f, 8.0f}, {3, 2});
  CHECK(known.argmax(0).to_vector<int64_t>() == std::vector<int64_t>{2, 2});
  CHECK(known.argmax(-1).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
  CHECK(scalar_tensor(4.0).argmax(0).item<int64_t>() == 0);
}

TEST_CASE("reductions save only what their backward needs", "[reduce]") {
  Tensor x = leaf({4, 5}, 2);
  Tensor hidden = x * 2.0;  // an intermediate (TEMPORARY) of 4 x 5 float64 = 160 bytes
  int64_t before = activation_bytes();
  Tensor summed = hidden.sum({1});
  Tensor averaged = hidden.mean();
  CHECK(activation_bytes() == before);  // sum and mean save nothing
  auto [values_row, indices] = max(hidden, 1);
  CHECK(activation_bytes() - before == 4 * 8);  // the int64 indices
  Tensor peak = hidden.amax({1});
  CHECK(activation_bytes() - before == 4 * 8 + 160 + 4 * 8);  // + the input and the result
}

TEST_CASE("gradcheck: sum and mean over several dims, keepdim true and false", "[reduce]") {
  Tensor x = leaf({2, 3, 4}, 3);
  for (bool keepdim : {false, true}) {
    check_gradients([keepdim](const std::vector<Tensor>& in) { return in[0].sum({0, 2}, keepdim); }, {x});
    check_gradients([keepdim](const std::vector<Tensor>& in) { return in[0].sum({-1}, keepdim); }, {x});
    check_gradients([keepdim](const std::vector<Tensor>& in) { return in[0].mean({1, 2}, keepdim); }, {x});
    check_gradients([keepdim](const std::vector<Tensor>& in) { return in[0].mean({0}, keepdim); }, {x});
  }
  check_gradients([](const std::vector<Tensor>& in) { return in[0].sum(); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].mean(); }, {x});
  // Non-contiguous inputs: reduce a transposed view and a strided slice.
  check_gradients([](const std::vector<Tensor>& in) { return in[0].transpose(0, 2).sum({0, 1}); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].slice(2, 0, 4, 2).mean({0, 2}, true); }, {x});
  // The gradient of a sum feeding another op (an expanded, stride-0 gradient downstream).
  check_gradients([](const std::vector<Tensor>& in) { return in[0].sum({1}) * in[0].select(1, 0); }, {x});
}

TEST_CASE("gradcheck: max, amax and max along a dim", "[reduce]") {
  Tensor x = leaf({2, 3, 4}, 4);
  check_gradients([](const std::vector<Tensor>& in) { return max(in[0]); }, {x});
  for (bool keepdim : {false, true}) {
    check_gradients([keepdim](const std::vector<Tensor>& in) { return in[0].amax({0, 2}, keepdim); }, {x});
    check_gradients([keepdim](const std::vector<Tensor>& in) { return in[0].amax({-2}, keepdim); }, {x});
    for (int64_t dim : {1, -1}) {
      check_gradients([=](const std::vector<Tensor>& in) { return std::get<0>(max(in[0], dim, keepdim)); }, {x});
    }
  }
  check_gradients([](const std::vector<Tensor>& in) { return in[0].permute({2, 0, 1}).amax({1, 2}); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return std::get<0>(max(in[0].transpose(0, 1), 0)); }, {x});
}
