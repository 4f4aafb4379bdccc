// tests/autograd/test_indexing.cpp — index_select, gather and Tensor::index / operator[]:
// forward values against hand-computed ones (PyTorch's results for the same calls),
// gradients against finite differences, 16-bit gradients summed unrounded, views where
// PyTorch gives views, and the errors.
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/op_test_support.h"
#include "autograd/tensor_checks.h"
#include "memgrad/autograd/indexing.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/factory.h"

using namespace mg;
using namespace mg::indexing;
using mg_test::check_gradients;
using mg_test::contains;
using mg_test::counting;
using mg_test::error_message;
using mg_test::leaf;

namespace {

Tensor int64s(const std::vector<int64_t>& values, const Shape& sizes = {}) { return from_vector(values, sizes); }

std::vector<double> values_of(const Tensor& x) { return x.to_vector<double>(); }

}  // namespace

TEST_CASE("index_select picks slices along a dim in the index's order, repeats allowed", "[indexing]") {
  const Tensor x = counting({3, 4});  // [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
  Tensor columns = x.index_select(1, int64s({3, 0, 3}));
  CHECK(columns.sizes() == Shape{3, 3});
  CHECK(values_of(columns) == std::vector<double>{3, 0, 3, 7, 4, 7, 11, 8, 11});
  Tensor rows = index_select(x, -2, from_vector<int32_t>({2, 0}));  // int32 index, negative dim
  CHECK(rows.sizes() == Shape{2, 4});
  CHECK(values_of(rows) == std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3});
  // A 0-d index keeps the dim with size 1; an empty one gives size 0; a transposed input reads through its strides.
  CHECK(x.index_select(0, full({}, 1.0, {.dtype = DType::Int64})).sizes() == Shape{1, 4});
  CHECK(x.index_select(1, int64s({})).sizes() == Shape{3, 0});
  CHECK(values_of(x.t().index_select(1, int64s({2}))) == std::vector<double>{8, 9, 10, 11});
  // Any dtype moves: an int64 tensor's rows.
  CHECK(int64s({5, 6, 7}).index_select(0, int64s({2, 2})).to_vector<int64_t>() == std::vector<int64_t>{7, 7});
}

TEST_CASE("gather takes out[i][j] = x[index[i][j]][j] (dim 0) or x[i][index[i][j]] (dim 1)", "[indexing]") {
  const Tensor x = counting({2, 3});  // [[0 1 2] [3 4 5]]
  Tensor along_columns = x.gather(1, int64s({2, 0, 1, 1}, {2, 2}));
  CHECK(along_columns.sizes() == Shape{2, 2});
  CHECK(values_of(along_columns) == std::vector<double>{2, 0, 4, 4});
  Tensor along_rows = gather(x, 0, from_vector<int32_t>({1, 0, 1}, {1, 3}));
  CHECK(values_of(along_rows) == std::vector<double>{3, 1, 5});
  // An index longer than the input along dim, and a strided (transposed) index.
  CHECK(values_of(x.gather(-1, int64s({0, 0, 0, 2}, {1, 4}))) == std::vector<double>{0, 0, 0, 2});
  CHECK(values_of(x.gather(1, int64s({2, 1, 0, 2}, {2, 2}).t())) == std::vector<double>{2, 0, 4, 5});
}

TEST_CASE("index_select and gather: gradients against finite differences", "[indexing][gradcheck]") {
  const Tensor index = int64s({2, 0, 2, 3});
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].index_select(1, index); }, {leaf({3, 4}, 1)});
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].t().index_select(0, index); },
                  {leaf({3, 4}, 2)});
  const Tensor picks = int64s({1, 1, 0, 2, 2, 2, 0, 1}, {2, 4});
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].gather(1, picks); }, {leaf({2, 3}, 3)});
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].gather(0, picks.index({Slice(), Slice(0, 3)})); },
                  {leaf({3, 3}, 4)});
}

TEST_CASE("a 16-bit input's gradient is summed in float32, then rounded once", "[indexing]") {
  // 3000 picks of one element: float16 counts 1 + 1 + ... only up to 2048 exactly.
  Tensor x = ones({1}, {.dtype = DType::Float16, .requires_grad = true});
  sum(x.index_select(0, zeros({3000}, {.dtype = DType::Int64}))).backward();
  CHECK(x.grad().dtype() == DType::Float16);
  CHECK(x.grad().item() == 3000.0);
}

TEST_CASE("out-of-range indices and bad index tensors are errors naming the value, dim and size", "[indexing]") {
  const Tensor x = counting({3, 4});
  std::string message = error_message([&] { x.index_select(1, int64s({0, 4})); });
  CHECK(contains(message, "index_select: index 4 at position 1"));
  CHECK(contains(message, "dimension 1 of size 4"));
  CHECK(contains(error_message([&] { x.gather(0, int64s({0, -1, 0, 0}, {1, 4})); }),
                 "gather: index -1 at position 1"));
  CHECK(contains(error_message([&] { x.index_select(0, zeros({2})); }), "expected an int64 or int32 index"));
  CHECK(contains(error_message([&] { x.index_select(0, int64s({0, 1}, {1, 2})); }), "expected a 1-d (or 0-d) index"));
  CHECK(contains(error_message([&] { x.gather(0, int64s({0, 1})); }), "expected an index of the input's rank 2"));
  CHECK(contains(error_message([&] { x.gather(0, int64s({0, 0, 0, 0, 0}, {1, 5})); }), "larger than the input"));
  CHECK(contains(error_message([&] { x.index_select(2, int64s({0})); }), "dimension 2 is out of range"));
}

TEST_CASE("index with integers, slices, None and Ellipsis gives PyTorch's views", "[indexing]") {
  const Tensor x = counting({2, 3, 4});
  Tensor column = x.index({Slice(), 0});  // x[:, 0]
  CHECK(column.sizes() == Shape{2, 4});
  CHECK(values_of(column) == std::vector<double>{0, 1, 2, 3, 12, 13, 14, 15});
  CHECK(column.storage() == x.storage());  // a view
  CHECK(x.index({Ellipsis, Slice(1, None)}).sizes() == Shape{2, 3, 3});  // x[..., 1:]
  CHECK(x.index({None, Slice(None, None, 2)}).sizes() == Shape{1, 1, 3, 4});  // x[None, ::2]
  // x[-1, -2:, ::3] = x[1, 1:3, [0, 3]]
  CHECK(values_of(x.index({-1, Slice(-2), Slice(None, None, 3)})) == std::vector<double>{16, 19, 20, 23});
  // Python's bounds: clamped, and an empty range when stop <= start.
  CHECK(x.index({Slice(-100, 100)}).sizes() == Shape{2, 3, 4});
  CHECK(x.index({Slice(), Slice(2, 1)}).sizes() == Shape{2, 0, 4});
  // Ellipsis in the middle, None at the end, and no entries at all.
  CHECK(x.index({0, Ellipsis, 1}).sizes() == Shape{3});
  CHECK(values_of(x.index({0, Ellipsis, 1})) == std::vector<double>{1, 5, 9});
  CHECK(x.index({Ellipsis, None}).sizes() == Shape{2, 3, 4, 1});
  CHECK(x.index({}).sizes() == Shape{2, 3, 4});
  // operator[] selects along dim 0.
  CHECK(values_of(x[1][2]) == std::vector<double>{20, 21, 22, 23});
  CHECK(values_of(x[-2][0]) == std::vector<double>{0, 1, 2, 3});
}

TEST_CASE("index with an int64 tensor picks along its dim, and an n-d index puts its dims there", "[indexing]") {
  const Tensor x = counting({2, 3, 4});
  Tensor picked = x.index({Slice(), int64s({2, 0})});  // x[:, [2, 0]]
  CHECK(picked.sizes() == Shape{2, 2, 4});
  CHECK(values_of(picked.index({0, Slice(), 0})) == std::vector<double>{8, 0});
  Tensor grid = x.index({int64s({1, 0, 0, 1}, {2, 2})});  // x[[[1, 0], [0, 1]]]
  CHECK(grid.sizes() == Shape{2, 2, 3, 4});
  CHECK(values_of(grid.index({0, 1, 0, 0})) == std::vector<double>{0});
  CHECK(values_of(grid.index({1, 1, 0, 0})) == std::vector<double>{12});
  // A 0-d tensor index selects (the dim goes), as an integer does.
  CHECK(x.index({Slice(), full({}, 1.0, {.dtype = DType::Int64})}).sizes() == Shape{2, 4});
  CHECK(values_of(x.index({Ellipsis, from_vector<int32_t>({3})})) == std::vector<double>{3, 7, 11, 15, 19, 23});
}

TEST_CASE("index: gradients through slices, None, Ellipsis and a tensor entry", "[indexing][gradcheck]") {
  check_gradients([](const std::vector<Tensor>& in) { return in[0].index({Slice(1, None), Slice(None, None, 2)}); },
                  {leaf({4, 5}, 5)});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].index({None, -1, Ellipsis, Slice(-2)}); },
                  {leaf({3, 2, 4}, 6)});
  const Tensor rows = int64s({3, 0, 3});
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].index({Slice(), rows, Slice(1, 3)}); },
                  {leaf({2, 4, 3}, 7)});
  check_gradients([](const std::vector<Tensor>& in) { return in[0][1]; }, {leaf({2, 3}, 8)});
}

TEST_CASE("index errors: too many indices, two Ellipsis, out of range, bad steps and tensors", "[indexing]") {
  const Tensor x = counting({2, 3});
  std::string too_many = error_message([&] { x.index({0, 1, 0}); });
  CHECK(contains(too_many, "too many indices for a tensor of 2 dimension(s)"));
  CHECK(contains(too_many, "[0, 1, 0]"));
  CHECK(contains(error_message([&] { x.index({Ellipsis, 0, Ellipsis}); }), "only have a single Ellipsis"));
  std::string out_of_range = error_message([&] { x.index({Slice(), 3}); });
  CHECK(contains(out_of_range, "index 3 is out of range for dimension 1 of size 3"));
  CHECK(contains(error_message([&] { x.index({-3}); }), "index -3 is out of range for dimension 0 of size 2"));
  CHECK(contains(error_message([&] { x.index({Slice(None, None, 0)}); }), "step must be positive, got 0"));
  CHECK(contains(error_message([&] { x.index({int64s({0}), int64s({1})}); }), "at most one tensor entry"));
  CHECK(contains(error_message([&] { x.index({full({2}, 1.0, {.dtype = DType::Bool})}); }),
                 "boolean masks are not supported"));
  CHECK(contains(error_message([&] { x.index({Slice(), int64s({5})}); }), "index 5 at position 0"));
  CHECK(contains(error_message([&] { x[2]; }), "select: index 2 is out of range"));
}
