// tests/autograd/test_transformer_shapes.cpp — the shape ops a transformer needs:
// masked_fill, tril/triu, split/chunk, and checks of the existing views, cat, batched
// matmul, arange and argmax as attention uses them; that a packed (B, T, 3C) gradient goes
// back through the heads' views and split without a copy. Values against hand-computed
// numbers, gradcheck in float64, and one test per error.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/masked_fill.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/node.h"
#include "autograd/op_test_support.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "autograd/tensor_checks.h"
#include "memgrad/autograd/split.h"
#include "memgrad/core/factory.h"

using namespace mg;
using mg_test::contains;
using mg_test::error_message;

namespace {

using mg_test::check_gradients;
using mg_test::counting;
using mg_test::cpu_allocated_bytes;
using mg_test::leaf;

Tensor bool_tensor(const std::vector<bool>& values, const Shape& sizes) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return from_vector<uint8_t>(bytes, sizes).to(DType::Bool);
}

std::vector<double> values(const Tensor& x) { return x.to(DType::Float64).to_vector<double>(); }

}  // namespace

// ---- masked_fill ----

TEST_CASE("masked_fill writes the value where the broadcast mask is true", "[masked_fill]") {
  Tensor x = counting({2, 3});
  Tensor column_mask = bool_tensor({true, false, true}, {3});  // broadcast over rows
  CHECK(values(masked_fill(x, column_mask, -1.0)) == std::vector<double>{-1, 1, -1, -1, 4, -1});
  Tensor row_mask = bool_tensor({false, true}, {2, 1});  // broadcast over columns
  CHECK(values(masked_fill(x, row_mask, 7.0)) == std::vector<double>{0, 1, 2, 7, 7, 7});

  // -inf survives every floating dtype; the output is contiguous even for a strided input.
  double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16}) {
    Tensor transposed = counting({3, 2}).to(dtype).t();  // (2, 3), not contiguous
    Tensor output = masked_fill(transposed, column_mask, -inf);
    CHECK(output.is_contiguous());
    CHECK(output.dtype() == dtype);
    CHECK(values(output) == std::vector<double>{-inf, 2, -inf, -inf, 3, -inf});
  }
  // Integer tensors too.
  Tensor integers = from_vector<int64_t>({1, 2, 3}, {3});
  CHECK(integers.dtype() == DType::Int64);
  CHECK(values(masked_fill(integers, column_mask, 0.0)) == std::vector<double>{0, 2, 0});
}

TEST_CASE("masked_fill's gradient is zero where filled and saves only the mask", "[masked_fill]") {
  Tensor mask = bool_tensor({true, false, false, true, true, false}, {2, 1, 3});
  check_gradients([&](const std::vector<Tensor>& in) { return masked_fill(in[0], mask, -5.0); },
                  {leaf({2, 4, 3}, 1)});
  Tensor causal = bool_tensor({false, true, false, false}, {2, 2});
  check_gradients([&](const std::vector<Tensor>& in) { return masked_fill(mul(in[0], in[0]), causal, 0.5); },
                  {leaf({3, 2, 2}, 2)});

  Tensor x = leaf({2, 3}, 3);
  Tensor row_mask = bool_tensor({true, false, true}, {3});
  Tensor output = masked_fill(x, row_mask, 1.0);
  sum(mul(output, 3.0)).backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 3, 0, 0, 3, 0});
}

TEST_CASE("masked_fill rejects a mask that is not bool, not broadcastable, or elsewhere", "[masked_fill]") {
  Tensor x = counting({2, 3});
  std::string not_bool = error_message([&] { masked_fill(x, zeros({3}), 0.0); });
  CHECK(contains(not_bool, "must be bool"));
  CHECK(contains(not_bool, "float32"));
  std::string wrong_shape = error_message([&] { masked_fill(x, bool_tensor({true, false}, {2}), 0.0); });
  CHECK(contains(wrong_shape, "does not broadcast"));
  CHECK(contains(wrong_shape, "[2]"));
  CHECK(contains(wrong_shape, "[2, 3]"));
  std::string too_many_dims =
      error_message([&] { masked_fill(x, bool_tensor({true, false, true}, {1, 1, 3}), 0.0); });
  CHECK(contains(too_many_dims, "does not broadcast"));
}

// ---- tril / triu ----

TEST_CASE("tril and triu keep the band around the chosen diagonal of the last two dims", "[tril]") {
  Tensor x = add(counting({3, 4}), 1.0);  // 1..12
  CHECK(values(tril(x)) == std::vector<double>{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  CHECK(values(triu(x)) == std::vector<double>{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  CHECK(values(tril(x, 1)) == std::vector<double>{1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12});
  CHECK(values(triu(x, -1)) == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
  CHECK(values(tril(x, -3)) == std::vector<double>(12, 0.0));
  // Batched: every matrix of the leading dims gets the same band.
  Tensor batched = add(counting({2, 2, 2}), 1.0);
  CHECK(values(triu(batched, 1)) == std::vector<double>{0, 2, 0, 0, 0, 6, 0, 0});
}

TEST_CASE("tril and triu gradients are the same band of the gradient", "[tril]") {
  check_gradients([](const std::vector<Tensor>& in) { return tril(in[0]); }, {leaf({2, 3, 4}, 4)});
  check_gradients([](const std::vector<Tensor>& in) { return triu(in[0], 1); }, {leaf({4, 3}, 5)});
  CHECK(contains(error_message([] { tril(counting({3})); }), "at least 2 dimensions"));
}

// ---- split / chunk ----

TEST_CASE("split and chunk give views of consecutive pieces, as torch", "[split]") {
  Tensor x = counting({2, 5});
  int64_t before = cpu_allocated_bytes();
  std::vector<Tensor> pieces = split(x, 2, 1);
  CHECK(cpu_allocated_bytes() == before);
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[0].sizes() == Shape{2, 2});
  CHECK(pieces[2].sizes() == Shape{2, 1});
  for (const Tensor& piece : pieces) CHECK(piece.storage() == x.storage());
  CHECK(values(pieces[1]) == std::vector<double>{2, 3, 7, 8});
  CHECK(values(pieces[2]) == std::vector<double>{4, 9});

  std::vector<Tensor> sized = split(x, std::vector<int64_t>{1, 0, 4}, -1);
  REQUIRE(sized.size() == 3);
  CHECK(sized[1].sizes() == Shape{2, 0});
  CHECK(values(sized[2]) == std::vector<double>{1, 2, 3, 4, 6, 7, 8, 9});

  // chunk: pieces of ceil(size / chunks), so 6 in 4 chunks gives 3 pieces of 2.
  CHECK(chunk(counting({6}), 4).size() == 3);
  std::vector<Tensor> rows = chunk(x, 2, 0);
  REQUIRE(rows.size() == 2);
  CHECK(values(rows[1]) == std::vector<double>{5, 6, 7, 8, 9});
  std::vector<Tensor> thirds = chunk(counting({7, 2}), 3);
  REQUIRE(thirds.size() == 3);
  CHECK(thirds[2].sizes() == Shape{1, 2});
}

TEST_CASE("split's one node writes every piece's gradient into one tensor", "[split]") {
  // A piece nobody uses gets zeros; gradients flow to the base through every view.
  check_gradients(
      [](const std::vector<Tensor>& in) {
        std::vector<Tensor> pieces = split(in[0], std::vector<int64_t>{2, 1, 3}, 1);
        return cat({mul(pieces[0], pieces[0]), mul(pieces[2], 3.0)}, 1);
      },
      {leaf({3, 6}, 6)});
  check_gradients(
      [](const std::vector<Tensor>& in) {
        std::vector<Tensor> qkv = chunk(in[0], 3, -1);  // (2, 4, 3 * 2) -> three (2, 4, 2)
        return matmul(qkv[0], transpose(add(qkv[1], qkv[2]), -2, -1));
      },
      {leaf({2, 4, 6}, 7)});

  Tensor x = leaf({4, 3}, 8);
  std::vector<Tensor> pieces = split(x, 1, 0);
  REQUIRE(pieces.size() == 4);
  CHECK(pieces[0].grad_fn() == pieces[3].grad_fn());
  CHECK(std::string(pieces[0].grad_fn()->name()) == "SplitBackward");
  sum(add(mul(pieces[1], 2.0), pieces[3])).backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 0, 0, 2, 2, 2, 0, 0, 0, 1, 1, 1});
}

TEST_CASE("split and chunk reject sizes that do not add up and non-positive counts", "[split]") {
  Tensor x = counting({2, 5});
  std::string wrong_sum = error_message([&] { split(x, std::vector<int64_t>{2, 2}, 1); });
  CHECK(contains(wrong_sum, "sum to 4"));
  CHECK(contains(wrong_sum, "has size 5"));
  CHECK(contains(error_message([&] { split(x, std::vector<int64_t>{6, -1}, 1); }), "non-negative"));
  CHECK(contains(error_message([&] { split(x, 0, 1); }), "split_size must be positive"));
  CHECK(contains(error_message([&] { chunk(x, 0, 1); }), "chunks must be positive"));
  CHECK(contains(error_message([&] { chunk(x, -2); }), "chunks must be positive"));
}

// ---- what attention uses of the existing ops ----

TEST_CASE("transpose and permute of a (B, T, H, D) tensor are views, not copies", "[transformer_shapes]") {
  Tensor x = counting({2, 3, 4, 5});
  int64_t before = cpu_allocated_bytes();
  Tensor heads_first = x.transpose(1, 2);  // (B, H, T, D)
  Tensor permuted = x.permute({0, 2, 3, 1});
  CHECK(cpu_allocated_bytes() == before);
  CHECK(heads_first.storage() == x.storage());
  CHECK(permuted.storage() == x.storage());
  CHECK(heads_first.sizes() == Shape{2, 4, 3, 5});
  CHECK(heads_first.strides() == Shape{60, 5, 20, 1});
  // element (b=1, h=2, t=1, d=3) is x[1, 1, 2, 3] = 60 + 20 + 10 + 3
  CHECK(values(heads_first.select(0, 1).select(0, 2).select(0, 1).select(0, 3)) == std::vector<double>{93});
}

TEST_CASE("cat's backward hands each input its slice of the gradient", "[transformer_shapes]") {
  check_gradients([](const std::vector<Tensor>& in) { return cat({in[0], mul(in[1], in[1])}, 1); },
                  {leaf({2, 2, 3}, 9), leaf({2, 1, 3}, 10)});
  Tensor a = leaf({2, 2}, 11), b = leaf({2, 3}, 12);
  sum(mul(cat({a, b}, 1), counting({2, 5}))).backward();
  CHECK(values(a.grad()) == std::vector<double>{0, 1, 5, 6});
  CHECK(values(b.grad()) == std::vector<double>{2, 3, 4, 7, 8, 9});
}

TEST_CASE("batched matmul over (B, H) of (T, D) @ (D, T) has exact gradients", "[transformer_shapes]") {
  check_gradients([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                  {leaf({2, 3, 4, 5}, 13), leaf({2, 3, 5, 4}, 14)});
  // The attention pattern: q @ k^T with k^T a transposed view.
  check_gradients([](const std::vector<Tensor>& in) { return matmul(in[0], transpose(in[1], -2, -1)); },
                  {leaf({2, 2, 3, 4}, 15), leaf({2, 2, 3, 4}, 16)});
  // Values: batch (1, 1) of (2, 2) @ (2, 2).
  Tensor a = counting({1, 2, 2, 2}), b = add(counting({1, 2, 2, 2}), 1.0);
  // second matrices: a = [[4, 5], [6, 7]], b = [[5, 6], [7, 8]]
  CHECK(values(matmul(a, b).select(1, 1)) == std::vector<double>{55, 64, 79, 92});
}

TEST_CASE("arange and argmax along the last dim give what sampling and causal masks read", "[transformer_shapes]") {
  CHECK(values(arange(5.0, {.dtype = DType::Int64})) == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(values(arange(1.0, 2.0, 0.25)) == std::vector<double>{1, 1.25, 1.5, 1.75});
  Tensor logits = from_vector<float>({0.1f, 3.0f, -1.0f, 3.0f, 2.0f, 5.0f, -4.0f, 0.0f, 1.0f}, {3, 3});
  Tensor best = argmax(logits, -1);
  CHECK(best.dtype() == DType::Int64);
  CHECK(best.sizes() == Shape{3});
  CHECK(best.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 2});
  CHECK(argmax(logits.view({1, 3, 3}), -1, true).sizes() == Shape{1, 3, 1});
  // Ties: the first maximum, as torch.
  CHECK(argmax(from_vector<float>({2.0f, 7.0f, 7.0f}, {1, 3}), -1).to_vector<int64_t>() == std::vector<int64_t>{1});
}

// ---- the packed gradient: split's backward and the head views' backwards copy nothing ----

TEST_CASE("split's backward returns the pieces' region itself when their gradients sit in place", "[split]") {
  Tensor x = leaf({2, 3, 6}, 20);
  std::vector<Tensor> pieces = split(x, 2, 2);  // three (2, 3, 2)
  autograd::Node& node = *pieces[0].grad_fn();
  const Tensor packed = counting({2, 3, 6});  // what a consumer wrote for the three, in place
  auto piece_of = [](const Tensor& tensor, int64_t which) { return narrow(tensor, 2, 2 * which, 2); };

  SECTION("in place: the consumer's storage, seen as the input, no bytes") {
    int64_t before = cpu_allocated_bytes();
    Tensor grad = node.apply({piece_of(packed, 0), piece_of(packed, 1), piece_of(packed, 2)}).at(0);
    CHECK(cpu_allocated_bytes() == before);
    CHECK(grad.storage() == packed.storage());
    CHECK(grad.sizes() == Shape{2, 3, 6});
    CHECK(grad.strides() == Shape{18, 6, 1});
    CHECK(values(grad) == values(packed));
  }
  SECTION("in place at an offset into a larger storage") {
    const Tensor larger = counting({40});
    const Tensor inner = larger.narrow(0, 4, 36).view({2, 3, 6});
    Tensor grad = node.apply({piece_of(inner, 0), piece_of(inner, 1), piece_of(inner, 2)}).at(0);
    CHECK(grad.storage() == larger.storage());
    CHECK(grad.storage_offset() == 4);
    CHECK(values(grad) == values(inner));
  }
  SECTION("from unrelated tensors: one new gradient holding each") {
    Tensor grad = node.apply({contiguous_copy(piece_of(packed, 0)), contiguous_copy(piece_of(packed, 1)),
                              contiguous_copy(piece_of(packed, 2))}).at(0);
    CHECK(grad.storage() != packed.storage());
    CHECK(values(grad) == values(packed));
  }
  SECTION("one storage, but the pieces swapped: copied into place") {
    Tensor grad = node.apply({piece_of(packed, 1), piece_of(packed, 0), piece_of(packed, 2)}).at(0);
    CHECK(grad.storage() != packed.storage());
    CHECK(values(piece_of(grad, 0)) == values(piece_of(packed, 1)));
    CHECK(values(piece_of(grad, 1)) == values(piece_of(packed, 0)));
    CHECK(values(piece_of(grad, 2)) == values(piece_of(packed, 2)));
  }
  SECTION("a missing piece: zeros there, the rest copied") {
    Tensor grad = node.apply({piece_of(packed, 0), Tensor(), piece_of(packed, 2)}).at(0);
    CHECK(grad.storage() != packed.storage());
    CHECK(values(piece_of(grad, 0)) == values(piece_of(packed, 0)));
    CHECK(values(piece_of(grad, 1)) == std::vector<double>(12, 0.0));
    CHECK(values(piece_of(grad, 2)) == values(piece_of(packed, 2)));
  }
}

TEST_CASE("a head's (B, H, T, D) gradient in the packed layout goes back through transpose and view as a view",
          "[transformer_shapes]") {
  const int64_t batch = 2, seq = 3, heads = 2, head_dim = 4, channels = heads * head_dim;
  Tensor piece = split(leaf({batch, seq, 3 * channels}, 21), channels, 2)[1];  // k's (B, T, C)
  Tensor head = piece.view({batch, seq, heads, head_dim}).transpose(1, 2);     // (B, H, T, D)
  // The fused backward's gradient for it: k's own strides and offset in a packed buffer.
  const Tensor buffer = counting({batch, seq, 3 * channels});
  const Tensor grad_head = make_view(buffer, head.sizes(), head.strides(), head.storage_offset());
  autograd::Node& transpose_node = *head.grad_fn();
  autograd::Node& view_node = *transpose_node.next_edges()[0].function;
  int64_t before = cpu_allocated_bytes();
  Tensor grad_piece = view_node.apply(transpose_node.apply({grad_head})).at(0);
  CHECK(cpu_allocated_bytes() == before);
  CHECK(grad_piece.storage() == buffer.storage());
  CHECK(grad_piece.sizes() == Shape{batch, seq, channels});
  CHECK(grad_piece.strides() == Shape{seq * 3 * channels, 3 * channels, 1});
  CHECK(grad_piece.storage_offset() == channels);
  CHECK(values(grad_piece) == values(buffer.narrow(2, channels, channels)));
}
