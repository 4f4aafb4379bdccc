// tests/autograd/test_embedding.cpp — embedding: forward rows against the table, the
// weight's gradient against finite differences and against a hand-made scatter-add
// (duplicates summed, the padding row left at zero), int32 indices, 16-bit tables
// summed in float, what the node saves, and the errors.
#include <catch2/catch.hpp>

#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/embedding.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/reduce.h"
#include "autograd/op_test_support.h"
#include "autograd/tensor_checks.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;
using mg_test::contains;
using mg_test::error_message;
using mg_test::normal;

namespace {

int64_t activation_bytes() {
  return allocator_for(Device::cpu()).stats().category(MemoryCategory::Activation).current;
}

}  // namespace

TEST_CASE("embedding looks up rows: result shape indices + (D), int64 and int32 alike", "[embedding]") {
  Tensor weight = normal({5, 3}, 1);
  std::vector<int64_t> rows = {4, 0, 2, 2, 1, 4};
  Tensor indices = from_vector<int64_t>(rows, {2, 3});
  Tensor out = embedding(weight, indices);
  CHECK(out.sizes() == Shape{2, 3, 3});
  CHECK(out.dtype() == DType::Float64);
  std::vector<double> table = weight.to_vector<double>(), values = out.to_vector<double>();
  for (size_t n = 0; n < rows.size(); ++n) {
    for (int64_t d = 0; d < 3; ++d) CHECK(values[n * 3 + d] == table[rows[n] * 3 + d]);
  }
  Tensor from_int32 = embedding(weight, from_vector<int32_t>({4, 0, 2, 2, 1, 4}, {2, 3}));
  CHECK(from_int32.sizes() == Shape{2, 3, 3});
  CHECK(from_int32.to_vector<double>() == values);
  // A 0-d index gives one row; a transposed (non-contiguous) index tensor reads in its order.
  CHECK(embedding(weight, full({}, 2.0, {.dtype = DType::Int64})).to_vector<double>() ==
        std::vector<double>(table.begin() + 6, table.begin() + 9));
  Tensor transposed = embedding(weight, indices.t());
  CHECK(transposed.sizes() == Shape{3, 2, 3});
  std::vector<double> first = transposed.to_vector<double>();
  CHECK(std::vector<double>(first.begin() + 3, first.begin() + 6) == std::vector<double>(table.begin() + 6, table.begin() + 9));
}

TEST_CASE("embedding's weight gradient matches finite differences, with duplicate indices", "[embedding]") {
  Tensor weight = normal({6, 4}, 2, true);
  Tensor indices = from_vector<int64_t>({1, 5, 1, 0, 1, 3, 5, 2}, {2, 4});
  GradcheckResult result = gradcheck([&](const std::vector<Tensor>& in) { return embedding(in[0], indices); }, {weight});
  INFO(result.message);
  CHECK(result.passed);
  GradcheckResult from_int32 = gradcheck(
      [](const std::vector<Tensor>& in) { return embedding(in[0], from_vector<int32_t>({3, 3, 0}, {3})); }, {weight});
  INFO(from_int32.message);
  CHECK(from_int32.passed);
}

TEST_CASE("embedding's weight gradient sums duplicates and leaves padding_idx at zero", "[embedding]") {
  const int64_t rows = 5, width = 3;
  Tensor weight = normal({rows, width}, 3, true);
  std::vector<int64_t> positions = {2, 0, 2, 4, 2, 0, 1};
  const int64_t padding = 0;
  Tensor out = embedding(weight, from_vector<int64_t>(positions), padding);
  // The padding row is still read in the forward.
  std::vector<double> table = weight.to_vector<double>(), values = out.to_vector<double>();
  CHECK(values[3] == table[0]);
  Tensor grad_output = normal({7, width}, 4);
  sum(mul(out, grad_output)).backward();
  std::vector<double> upstream = grad_output.to_vector<double>();
  std::vector<double> expected(rows * width, 0.0);
  for (size_t n = 0; n < positions.size(); ++n) {
    if (positions[n] == padding) continue;
    for (int64_t d = 0; d < width; ++d) expected[positions[n] * width + d] += upstream[n * width + d];
  }
  std::vector<double> got = weight.grad().to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-15));
  for (int64_t d = 0; d < width; ++d) CHECK(got[padding * width + d] == 0.0);
  for (int64_t d = 0; d < width; ++d) CHECK(got[3 * width + d] == 0.0);  // row 3 was never looked up
}

TEST_CASE("embedding's gradient of a 16-bit table is summed in float", "[embedding]") {
  // 300 gradients of 1 into one bfloat16 row: summed in bfloat16 the total would stop at
  // 256 (256 + 1 rounds back to 256); summed in float it is 300, which bfloat16 holds.
  Tensor weight = zeros({4, 2}, {.dtype = DType::BFloat16});
  weight.requires_grad_();
  Tensor out = embedding(weight, full({300}, 1.0, {.dtype = DType::Int64}));
  CHECK(out.dtype() == DType::BFloat16);
  out.backward(ones({300, 2}, {.dtype = DType::BFloat16}));
  CHECK(weight.grad().dtype() == DType::BFloat16);
  CHECK(weight.grad().to(DType::Float64).to_vector<double>() ==
        std::vector<double>{0.0, 0.0, 300.0, 300.0, 0.0, 0.0, 0.0, 0.0});
}

TEST_CASE("embedding saves only its indices", "[embedding]") {
  Tensor weight = normal({50, 16}, 5, true);
  weight.set_memory_category(MemoryCategory::Parameter);
  int64_t before = activation_bytes();
  {
    Tensor indices = from_vector<int64_t>({3, 7, 7, 49, 0, 12}, {2, 3});
    Tensor out = embedding(weight, indices);
    REQUIRE(out.grad_fn() != nullptr);
    CHECK(std::string(out.grad_fn()->name()) == "EmbeddingBackward");
    CHECK(activation_bytes() - before == 6 * 8);
    Tensor from_int32 = embedding(weight, from_vector<int32_t>({3, 7, 7, 49, 0, 12}, {2, 3}));
    CHECK(activation_bytes() - before == 6 * 8 + 6 * 4);  // int32 indices are kept as they came
    sum(out).backward();
    CHECK(activation_bytes() - before == 6 * 4);  // released once its node has run
  }
  CHECK(activation_bytes() == before);
  // Without gradients nothing is recorded or saved.
  Tensor frozen = embedding(weight.detach(), from_vector<int64_t>({1, 2}));
  CHECK(frozen.grad_fn() == nullptr);
  CHECK(activation_bytes() == before);
}

TEST_CASE("embedding errors explain themselves", "[embedding]") {
  Tensor weight = normal({10, 4}, 6);
  std::string message = error_message([&] { embedding(weight, from_vector<int64_t>({1, 2, 3, 12, 5, 6}, {2, 3})); });
  CHECK(contains(message, "embedding: index 12 at position [1, 0] of indices of shape [2, 3] is out of range for an "
                          "embedding of 10 rows (weight shape [10, 4])"));
  CHECK(contains(message, "Hint: every index must lie in [0, 10)"));
  CHECK(contains(error_message([&] { embedding(weight, from_vector<int64_t>({-1})); }),
                 "embedding: index -1 at position [0]"));
  CHECK(contains(error_message([&] { embedding(weight, from_vector<int32_t>({10})); }), "index 10 at position [0]"));
  message = error_message([&] { embedding(weight, from_vector<int64_t>({1}), -2); });
  CHECK(contains(message, "embedding: padding_idx -2 is out of range for an embedding of 10 rows: expected -1 (no "
                          "padding row) or a row in [0, 10)"));
  CHECK(contains(message, "pass num_embeddings + padding_idx (8 here)"));
  CHECK(contains(error_message([&] { embedding(weight, from_vector<int64_t>({1}), 10); }), "padding_idx 10 is out of range"));
  CHECK(contains(error_message([&] { embedding(weight, from_vector<double>({1.0})); }),
                 "embedding: expected int64 or int32 indices, got float64"));
  CHECK(contains(error_message([&] { embedding(weight, from_vector<uint8_t>({1})); }),
                 "expected int64 or int32 indices, got uint8"));
  CHECK(contains(error_message([&] { embedding(normal({10}, 7), from_vector<int64_t>({1})); }),
                 "embedding: expected a 2-D weight (num_embeddings, embedding_dim), got shape [10]"));
  CHECK(contains(error_message([&] { embedding(zeros({3, 2}, {.dtype = DType::Int64}), from_vector<int64_t>({1})); }),
                 "embedding: expected a floating-point tensor, got int64"));
  CHECK(contains(error_message([&] { embedding(weight, Tensor()); }), "embedding: got an undefined tensor"));
  // An empty index tensor is fine: an empty result.
  Tensor none = embedding(weight, zeros({0, 3}, {.dtype = DType::Int64}));
  CHECK(none.sizes() == Shape{0, 3, 4});
}
