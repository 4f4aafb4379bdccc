// tests/autograd/test_shape.cpp — views and joins: values against hand-computed numbers,
// storage sharing (views allocate nothing), error messages, and gradcheck of every op.
#include <catch2/catch.hpp>

#include <vector>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/node.h"
#include "autograd/op_test_support.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/factory.h"

using namespace mg;
using Catch::Contains;

namespace {

using mg_test::check_gradients;
using mg_test::counting;
using mg_test::cpu_allocated_bytes;
using mg_test::leaf;

std::vector<double> values(const Tensor& x) { return x.to_vector<double>(); }

}  // namespace

TEST_CASE("every view shares its input's storage and allocates no bytes", "[shape]") {
  Tensor x = leaf({2, 3, 4}, 1);
  int64_t before = cpu_allocated_bytes();
  std::vector<Tensor> views = {
      x.view({6, -1}),       x.reshape({4, 6}),   x.permute({2, 0, 1}), x.transpose(0, 2),
      x.select(1, 0).t(),    x.narrow(2, 1, 2),   x.slice(1, 0, 3, 2),  x.select(-1, -1),
      x.unsqueeze(1),        x.unsqueeze(1).squeeze(), x.unsqueeze(3).squeeze(3),
      x.unsqueeze(0).expand({5, 2, 3, 4}), x.flatten(), x.flatten(1),
  };
  CHECK(cpu_allocated_bytes() == before);
  for (const Tensor& view : views) {
    CHECK(view.storage() == x.storage());
    // A view of a tensor that requires grad is part of the graph.
    REQUIRE(view.grad_fn());
  }
}

TEST_CASE("writing the base through its data pointer changes the view", "[shape]") {
  Tensor base = counting({2, 3});
  Tensor column = base.select(1, 2);  // base[:, 2] = [2, 5]
  Tensor transposed = base.t();       // (3, 2)
  base.data_ptr<double>()[5] = 50.0;
  CHECK(values(column) == std::vector<double>{2, 50});
  CHECK(values(transposed) == std::vector<double>{0, 3, 1, 4, 2, 50});
}

TEST_CASE("view infers -1, computes strides, and names both shapes when it cannot", "[shape]") {
  Tensor x = counting({2, 3, 4});
  Tensor v = x.view({4, -1});
  CHECK(v.sizes() == Shape{4, 6});
  CHECK(v.strides() == Shape{6, 1});
  CHECK(x.view({-1}).sizes() == Shape{24});

  // (3, 2, 4) with strides (4, 12, 1): the last dim may be split, the first two not merged.
  Tensor permuted = x.permute({1, 0, 2});
  Tensor split = permuted.view({3, 2, 2, 2});
  CHECK(split.strides() == Shape{4, 12, 2, 1});
  CHECK(values(split) == values(contiguous(permuted)));
  REQUIRE_THROWS_WITH(permuted.view({6, 4}), Contains("view size is not compatible") && Contains("[3, 2, 4]") &&
                                                 Contains("[6, 4]") && Contains("reshape"));

  REQUIRE_THROWS_WITH(x.view({5, -1}), Contains("[5, -1]") && Contains("24"));
  REQUIRE_THROWS_WITH(x.view({-1, -1}), Contains("-1"));
  REQUIRE_THROWS_WITH(x.view({5, 5}), Contains("[5, 5]"));
}

TEST_CASE("view handles size-1 dims, 0-d and empty tensors", "[shape]") {
  Tensor scalar = scalar_tensor(7.0, {.dtype = DType::Float64});
  CHECK(scalar.view({1, 1}).sizes() == Shape{1, 1});
  CHECK(scalar.view({1, 1}).view({}).item() == 7.0);
  Tensor empty_tensor = zeros({0, 3});
  CHECK(empty_tensor.view({3, 0}).sizes() == Shape{3, 0});
  REQUIRE_THROWS_WITH(empty_tensor.view({-1, 0}), Contains("[-1, 0]"));
  // A size-1 dim with an odd stride does not stop a view.
  Tensor column = counting({3, 4}).narrow(1, 1, 1);  // (3, 1) strides (4, 1)
  CHECK(column.view({3}).strides() == Shape{4});
  CHECK(values(column.view({3})) == std::vector<double>{1, 5, 9});
}

TEST_CASE("reshape views when it can and copies once when it must", "[shape]") {
  Tensor x = counting({2, 3});
  int64_t before = cpu_allocated_bytes();
  Tensor same = x.reshape({3, 2});
  CHECK(cpu_allocated_bytes() == before);
  CHECK(same.storage() == x.storage());

  Tensor copied = x.t().reshape({6});  // (3, 2) non-contiguous: needs a copy
  CHECK(copied.storage() != x.storage());
  CHECK(cpu_allocated_bytes() - before == 512);  // 48 bytes, rounded up to the allocator's 512
  CHECK(values(copied) == std::vector<double>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("permute, transpose and t reorder dims and check their arguments", "[shape]") {
  Tensor x = counting({2, 3, 4});
  Tensor p = x.permute({2, 0, -2});
  CHECK(p.sizes() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(values(p.select(0, 1).select(0, 1)) == std::vector<double>{13, 17, 21});
  CHECK(x.transpose(-1, 0).sizes() == Shape{4, 3, 2});
  CHECK(values(counting({2, 3}).t()) == std::vector<double>{0, 3, 1, 4, 2, 5});

  REQUIRE_THROWS_WITH(x.permute({0, 0, 1}), Contains("repeats dimension 0") && Contains("[2, 3, 4]"));
  REQUIRE_THROWS_WITH(x.permute({0, 1}), Contains("[0, 1]") && Contains("[2, 3, 4]"));
  REQUIRE_THROWS_WITH(x.transpose(0, 3), Contains("dimension 3 is out of range"));
  REQUIRE_THROWS_WITH(x.t(), Contains("2-D") && Contains("[2, 3, 4]"));
}

TEST_CASE("narrow, slice and select pick parts and negative indices count from the end", "[shape]") {
  Tensor x = counting({10});
  CHECK(values(x.slice(0, -7, 100, 2)) == std::vector<double>{3, 5, 7, 9});  // end clamps like Python
  CHECK(x.slice(0, 8, 2).numel() == 0);
  CHECK(values(x.slice(0, -100, 3)) == std::vector<double>{0, 1, 2});
  CHECK(values(x.narrow(0, -3, 2)) == std::vector<double>{7, 8});
  REQUIRE_THROWS_WITH(x.slice(0, 0, 5, 0), Contains("step"));
  REQUIRE_THROWS_WITH(x.narrow(0, 8, 3), Contains("exceeds dimension 0 of size 10"));

  Tensor m = counting({2, 3});
  CHECK(values(m.select(1, -1)) == std::vector<double>{2, 5});
  CHECK(m.select(0, 1).sizes() == Shape{3});
  CHECK(values(m.slice(1, 1, 3)) == std::vector<double>{1, 2, 4, 5});
  REQUIRE_THROWS_WITH(m.select(1, 3), Contains("index 3 is out of range") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(m.select(2, 0), Contains("out of range"));
}

TEST_CASE("squeeze, unsqueeze and flatten change only the shape", "[shape]") {
  Tensor x = counting({2, 1, 3, 1});
  CHECK(x.squeeze().sizes() == Shape{2, 3});
  CHECK(x.squeeze(1).sizes() == Shape{2, 3, 1});
  CHECK(x.squeeze(0).sizes() == Shape{2, 1, 3, 1});  // not size 1: unchanged
  CHECK(x.unsqueeze(0).sizes() == Shape{1, 2, 1, 3, 1});
  CHECK(x.unsqueeze(-1).sizes() == Shape{2, 1, 3, 1, 1});
  CHECK(x.unsqueeze(2).is_contiguous());
  REQUIRE_THROWS_WITH(x.unsqueeze(6), Contains("out of range"));

  Tensor y = counting({2, 3, 4});
  CHECK(y.flatten(1).sizes() == Shape{2, 12});
  CHECK(y.flatten(0, 1).sizes() == Shape{6, 4});
  CHECK(y.flatten().sizes() == Shape{24});
  CHECK(values(y.transpose(0, 2).flatten()) == values(contiguous(y.transpose(0, 2))));
  REQUIRE_THROWS_WITH(y.flatten(2, 1), Contains("start_dim"));
}

TEST_CASE("expand repeats size-1 dims with stride 0", "[shape]") {
  Tensor x = from_vector<double>({1, 2, 3}, {3, 1});
  Tensor e = x.expand({2, 3, 4});
  CHECK(e.sizes() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(values(e.select(0, 1).select(0, 2)) == std::vector<double>{3, 3, 3, 3});
  CHECK(x.expand({-1, 2}).sizes() == Shape{3, 2});
  REQUIRE_THROWS_WITH(x.expand({4, 2}), Contains("non-singleton dimension 0") && Contains("[4, 2]") &&
                                            Contains("[3, 1]"));
  REQUIRE_THROWS_WITH(x.expand({-1, 3, 2}), Contains("leading"));
  REQUIRE_THROWS_WITH(x.expand({2}), Contains("fewer dimensions"));
}

TEST_CASE("cat joins along a dim into one allocation and stack adds the dim", "[shape]") {
  Tensor a = counting({2, 2});
  Tensor b = from_vector<double>({10, 11}, {1, 2});
  Tensor c = from_vector<double>({20, 21, 22, 23, 24, 25}, {3, 2});
  int64_t before = cpu_allocated_bytes();
  Tensor rows = cat({a, b, c}, 0);
  CHECK(cpu_allocated_bytes() - before == 512);  // 6 x 2 float64 = 96 bytes, rounded
  CHECK(rows.sizes() == Shape{6, 2});
  CHECK(values(rows) == std::vector<double>{0, 1, 2, 3, 10, 11, 20, 21, 22, 23, 24, 25});

  Tensor columns = cat({a, a.t(), from_vector<double>({7, 8}, {2, 1})}, -1);
  CHECK(columns.sizes() == Shape{2, 5});
  CHECK(values(columns) == std::vector<double>{0, 1, 0, 2, 7, 2, 3, 1, 3, 8});

  Tensor stacked = stack({a, a.t()}, 1);
  CHECK(stacked.sizes() == Shape{2, 2, 2});
  CHECK(values(stacked) == std::vector<double>{0, 1, 0, 2, 2, 3, 1, 3});

  REQUIRE_THROWS_WITH(cat({a, c}, 1), Contains("tensor 1") && Contains("[3, 2]") && Contains("[2, 2]"));
  REQUIRE_THROWS_WITH(cat({a, a.to(DType::Float32)}, 0), Contains("tensor 1") && Contains("float32"));
  REQUIRE_THROWS_WITH(cat({a, a.flatten()}, 0), Contains("tensor 1") && Contains("[4]"));
  REQUIRE_THROWS_WITH(cat({a, b}, 2), Contains("out of range"));
  REQUIRE_THROWS_WITH(cat({}, 0), Contains("non-empty"));
  REQUIRE_THROWS_WITH(stack({a, b}, 0), Contains("tensor 1") && Contains("[1, 2]"));
}

TEST_CASE("views record a node only when a gradient is needed", "[shape]") {
  Tensor x = leaf({2, 3}, 2);
  CHECK(std::string(x.view({6}).grad_fn()->name()) == "ViewBackward");
  CHECK(std::string(x.t().grad_fn()->name()) == "TransposeBackward");
  CHECK_FALSE(counting({2, 3}).view({6}).grad_fn());
  NoGradGuard no_grad;
  Tensor v = x.view({6});
  CHECK_FALSE(v.grad_fn());
  CHECK_FALSE(v.requires_grad());
}

TEST_CASE("slice and select put the gradient back in place, zeros elsewhere", "[shape]") {
  Tensor x = zeros({5}, {.dtype = DType::Float64, .requires_grad = true});
  sum(x.slice(0, 1, 5, 2)).backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 1, 0, 1, 0});
  Tensor m = zeros({2, 3}, {.dtype = DType::Float64, .requires_grad = true});
  sum(m.select(1, -1)).backward();
  CHECK(values(m.grad()) == std::vector<double>{0, 0, 1, 0, 0, 1});
}

TEST_CASE("gradcheck: view, reshape, flatten, squeeze, unsqueeze", "[shape]") {
  Tensor x = leaf({2, 3, 4}, 3);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].view({4, -1}); }, {x});
  // Through a permuted (non-contiguous) input: one view that works, one reshape that copies.
  check_gradients([](const std::vector<Tensor>& in) { return in[0].permute({1, 0, 2}).view({3, 2, 2, 2}); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].transpose(0, 2).reshape({6, 4}); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].transpose(1, 2).flatten(1); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].unsqueeze(1).unsqueeze(-1).squeeze(); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].unsqueeze(2).squeeze(2); }, {x});
}

TEST_CASE("gradcheck: permute, transpose, t", "[shape]") {
  Tensor x = leaf({2, 3, 4}, 4);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].permute({2, 0, 1}); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].transpose(0, -1); }, {x});
  Tensor m = leaf({3, 4}, 5);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].t(); }, {m});
}

TEST_CASE("gradcheck: narrow, slice with step 2, select with negative index", "[shape]") {
  Tensor x = leaf({4, 5}, 6);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].narrow(1, 1, 3); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].slice(1, 0, 5, 2); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].slice(0, -3, 100, 2); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].select(1, -2); }, {x});
  // A slice of a non-contiguous view.
  check_gradients([](const std::vector<Tensor>& in) { return in[0].t().slice(0, 1, 5, 2).select(1, -1); }, {x});
}

TEST_CASE("gradcheck: expand", "[shape]") {
  Tensor x = leaf({3, 1}, 7);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].expand({2, 3, 4}); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].expand({-1, 2}); }, {x});
}

TEST_CASE("gradcheck: cat over dims 0 and 1 with three inputs, and stack", "[shape]") {
  Tensor a = leaf({2, 3}, 8);
  Tensor b = leaf({1, 3}, 9);
  Tensor c = leaf({2, 2}, 10);
  check_gradients([](const std::vector<Tensor>& in) { return cat({in[0], in[1], in[0]}, 0); }, {a, b});
  check_gradients([](const std::vector<Tensor>& in) { return cat({in[0], in[1].t(), in[2]}, 0); },
                  {leaf({2, 2}, 16), leaf({2, 1}, 11), c});
  check_gradients([](const std::vector<Tensor>& in) { return cat({in[0], in[1], in[2]}, 1); },
                  {a, leaf({2, 1}, 12), c});
  check_gradients([](const std::vector<Tensor>& in) { return stack({in[0], in[1], in[0].t()}, 1); },
                  {leaf({3, 3}, 13), leaf({3, 3}, 14)});
  check_gradients([](const std::vector<Tensor>& in) { return stack({in[0], in[1]}, -1); }, {c, leaf({2, 2}, 15)});
}
