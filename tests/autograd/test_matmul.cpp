// tests/autograd/test_matmul.cpp — matmul and linear: values against a naive triple loop,
// result shapes of every rank combination, gradients against finite differences, error
// messages, and the memory linear keeps for backward.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;

namespace {

int64_t category_bytes(MemoryCategory category) {
  return allocator_for(Device::cpu()).stats().category(category).current;
}

// A float64 leaf that requires grad, for gradcheck.
Tensor leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = DType::Float64, .requires_grad = true}, &generator);
}

Tensor random_float(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {}, &generator);
}

void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs) {
  // NOTE: a 0-d result is checked as shape [1]: gradcheck builds its seed with
  // from_vector(values, output.sizes()), which reads empty sizes as 1-D.
  auto at_least_1d = [&](const std::vector<Tensor>& in) {
    Tensor out = fn(in);
    return out.dim() == 0 ? reshape(out, {1}) : out;
  };
  GradcheckResult result = gradcheck(at_least_1d, inputs);
  INFO(result.message);
  CHECK(result.passed);
}

// The reference: batches of (m, k) @ (k, n) over row-major values, in double. A batch
// stride of 0 repeats one matrix over the batch.
std::vector<double> naive_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t batches,
                                 int64_t m, int64_t k, int64_t n, int64_t a_batch_stride,
                                 int64_t b_batch_stride) {
  std::vector<double> out(static_cast<size_t>(batches * m * n), 0.0);
  for (int64_t batch = 0; batch < batches; ++batch) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double total = 0;
        for (int64_t p = 0; p < k; ++p) {
          total += static_cast<double>(a[batch * a_batch_stride + i * k + p]) * b[batch * b_batch_stride + p * n + j];
        }
        out[batch * m * n + i * n + j] = total;
      }
    }
  }
  return out;
}

// max |got - expected| / max |expected|: the error relative to the result's scale.
double relative_error(const std::vector<float>& got, const std::vector<double>& expected) {
  REQUIRE(got.size() == expected.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - expected[i]));
    scale = std::max(scale, std::abs(expected[i]));
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("matmul matches a naive triple loop", "[matmul]") {
  SECTION("2-D @ 2-D") {
    Tensor a = random_float({7, 13}, 1), b = random_float({13, 5}, 2);
    Tensor c = matmul(a, b);
    CHECK(c.sizes() == Shape{7, 5});
    CHECK(relative_error(c.to_vector<float>(), naive_matmul(a.to_vector<float>(), b.to_vector<float>(), 1, 7, 13, 5,
                                                            0, 0)) < 1e-5);
  }
  SECTION("large 300x400 @ 400x500") {
    Tensor a = random_float({300, 400}, 3), b = random_float({400, 500}, 4);
    Tensor c = a.matmul(b);
    CHECK(c.sizes() == Shape{300, 500});
    CHECK(relative_error(c.to_vector<float>(), naive_matmul(a.to_vector<float>(), b.to_vector<float>(), 1, 300, 400,
                                                            500, 0, 0)) < 1e-5);
  }
  SECTION("batched (3, 4, 6) @ (3, 6, 2)") {
    Tensor a = random_float({3, 4, 6}, 5), b = random_float({3, 6, 2}, 6);
    Tensor c = matmul(a, b);
    CHECK(c.sizes() == Shape{3, 4, 2});
    CHECK(relative_error(c.to_vector<float>(), naive_matmul(a.to_vector<float>(), b.to_vector<float>(), 3, 4, 6, 2,
                                                            24, 12)) < 1e-5);
  }
  SECTION("a 2-D right operand is shared by the batch: (2, 3, 4) @ (4, 5)") {
    Tensor a = random_float({2, 3, 4}, 7), b = random_float({4, 5}, 8);
    Tensor c = matmul(a, b);
    CHECK(c.sizes() == Shape{2, 3, 5});
    CHECK(relative_error(c.to_vector<float>(), naive_matmul(a.to_vector<float>(), b.to_vector<float>(), 2, 3, 4, 5,
                                                            12, 0)) < 1e-5);
  }
  SECTION("a 2-D left operand is shared by the batch: (3, 4) @ (2, 4, 5)") {
    Tensor a = random_float({3, 4}, 9), b = random_float({2, 4, 5}, 10);
    Tensor c = matmul(a, b);
    CHECK(c.sizes() == Shape{2, 3, 5});
    CHECK(relative_error(c.to_vector<float>(), naive_matmul(a.to_vector<float>(), b.to_vector<float>(), 2, 3, 4, 5,
                                                            0, 20)) < 1e-5);
  }
  SECTION("transposed (non-contiguous) operands") {
    Tensor a = random_float({6, 4}, 11), b = random_float({5, 6}, 12);
    Tensor c = matmul(transpose(a, 0, 1), transpose(b, 0, 1));  // (4, 6) @ (6, 5)
    CHECK(c.sizes() == Shape{4, 5});
    std::vector<double> expected = naive_matmul(transpose(a, 0, 1).contiguous().to_vector<float>(),
                                                transpose(b, 0, 1).contiguous().to_vector<float>(), 1, 4, 6, 5, 0, 0);
    CHECK(relative_error(c.to_vector<float>(), expected) < 1e-5);
  }
  SECTION("batch dims that broadcast against each other: (2, 1, 3, 4) @ (5, 4, 2)") {
    Tensor a = random_float({2, 1, 3, 4}, 13), b = random_float({5, 4, 2}, 14);
    Tensor c = matmul(a, b);
    REQUIRE(c.sizes() == Shape{2, 5, 3, 2});
    std::vector<float> a_values = a.to_vector<float>(), b_values = b.to_vector<float>();
    std::vector<float> c_values = c.to_vector<float>();
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        std::vector<float> a_matrix(a_values.begin() + i * 12, a_values.begin() + (i + 1) * 12);
        std::vector<float> b_matrix(b_values.begin() + j * 8, b_values.begin() + (j + 1) * 8);
        std::vector<float> c_matrix(c_values.begin() + (i * 5 + j) * 6, c_values.begin() + (i * 5 + j + 1) * 6);
        CHECK(relative_error(c_matrix, naive_matmul(a_matrix, b_matrix, 1, 3, 4, 2, 0, 0)) < 1e-5);
      }
    }
  }
}

TEST_CASE("matmul follows torch.matmul for 1-D operands", "[matmul]") {
  Tensor v = from_vector<float>({1, 2, 3});
  Tensor m = from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});  // [[1, 2], [3, 4], [5, 6]]
  Tensor dot = matmul(v, v);
  CHECK(dot.dim() == 0);
  CHECK(dot.item() == 14.0);
  Tensor row = matmul(v, m);  // (3) @ (3, 2)
  CHECK(row.sizes() == Shape{2});
  CHECK(row.to_vector<float>() == std::vector<float>{22, 28});
  Tensor column = matmul(transpose(m, 0, 1), v);  // (2, 3) @ (3)
  CHECK(column.sizes() == Shape{2});
  CHECK(column.to_vector<float>() == std::vector<float>{22, 28});
  Tensor batch = from_vector<float>({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, {2, 2, 3});
  Tensor batched_matrix_vector = matmul(batch, v);  // (2, 2, 3) @ (3)
  CHECK(batched_matrix_vector.sizes() == Shape{2, 2});
  CHECK(batched_matrix_vector.to_vector<float>() == std::vector<float>{1, 2, 3, 6});
  Tensor vector_batched_matrix = matmul(v, transpose(batch, 1, 2));  // (3) @ (2, 3, 2)
  CHECK(vector_batched_matrix.sizes() == Shape{2, 2});
  CHECK(vector_batched_matrix.to_vector<float>() == std::vector<float>{1, 2, 3, 6});
}

TEST_CASE("matmul gradients match finite differences", "[matmul]") {
  auto product = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  SECTION("2-D @ 2-D") { check_gradients(product, {leaf({3, 4}, 1), leaf({4, 5}, 2)}); }
  SECTION("batched 3-D") { check_gradients(product, {leaf({2, 3, 4}, 3), leaf({2, 4, 5}, 4)}); }
  SECTION("batch-broadcast (2, 3, 4) @ (4, 5)") { check_gradients(product, {leaf({2, 3, 4}, 5), leaf({4, 5}, 6)}); }
  SECTION("batch-broadcast (3, 4) @ (2, 4, 5)") { check_gradients(product, {leaf({3, 4}, 7), leaf({2, 4, 5}, 8)}); }
  SECTION("batch dims broadcast both ways (2, 1, 3, 4) @ (3, 4, 2)") {
    check_gradients(product, {leaf({2, 1, 3, 4}, 9), leaf({3, 4, 2}, 10)});
  }
  SECTION("size-1 batch dim broadcast (1, 3, 4) @ (2, 4, 5)") {
    check_gradients(product, {leaf({1, 3, 4}, 11), leaf({2, 4, 5}, 12)});
  }
  SECTION("1-D . 1-D") { check_gradients(product, {leaf({4}, 13), leaf({4}, 14)}); }
  SECTION("1-D @ 2-D") { check_gradients(product, {leaf({4}, 15), leaf({4, 3}, 16)}); }
  SECTION("2-D @ 1-D") { check_gradients(product, {leaf({3, 4}, 17), leaf({4}, 18)}); }
  SECTION("1-D @ 3-D") { check_gradients(product, {leaf({4}, 19), leaf({2, 4, 3}, 20)}); }
  SECTION("3-D @ 1-D") { check_gradients(product, {leaf({2, 3, 4}, 21), leaf({4}, 22)}); }
  SECTION("transposed (non-contiguous) inputs") {
    check_gradients([](const std::vector<Tensor>& in) { return matmul(transpose(in[0], 0, 1), transpose(in[1], 1, 2)); },
                    {leaf({4, 3}, 23), leaf({2, 5, 4}, 24)});
  }
  SECTION("only one operand requires grad") {
    Tensor fixed = leaf({4, 5}, 26).detach();
    check_gradients([&](const std::vector<Tensor>& in) { return matmul(in[0], fixed); }, {leaf({2, 3, 4}, 25)});
    check_gradients([&](const std::vector<Tensor>& in) { return matmul(fixed, in[0]); }, {leaf({5, 2}, 27)});
  }
}

TEST_CASE("linear gradients match finite differences", "[matmul]") {
  auto with_bias = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  auto without_bias = [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); };
  SECTION("with bias") { check_gradients(with_bias, {leaf({3, 4}, 1), leaf({5, 4}, 2), leaf({5}, 3)}); }
  SECTION("without bias") { check_gradients(without_bias, {leaf({3, 4}, 4), leaf({5, 4}, 5)}); }
  SECTION("3-D input") { check_gradients(with_bias, {leaf({2, 3, 4}, 6), leaf({5, 4}, 7), leaf({5}, 8)}); }
  SECTION("1-D input") { check_gradients(with_bias, {leaf({4}, 9), leaf({5, 4}, 10), leaf({5}, 11)}); }
  SECTION("non-contiguous input and weight") {
    check_gradients(
        [](const std::vector<Tensor>& in) { return linear(transpose(in[0], 0, 1), transpose(in[1], 0, 1), in[2]); },
        {leaf({3, 2, 4}, 12), leaf({4, 5}, 13), leaf({5}, 14)});
  }
}

TEST_CASE("linear computes x @ weight^T + bias", "[matmul]") {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor weight = from_vector<float>({1, 0, 0, 0, 1, 1}, {2, 3});
  Tensor bias = from_vector<float>({10, 20});
  Tensor y = linear(x, weight, bias);
  CHECK(y.sizes() == Shape{2, 2});
  CHECK(y.to_vector<float>() == std::vector<float>{11, 25, 14, 31});
  Tensor batched = linear(reshape(x, {1, 2, 3}), weight);
  CHECK(batched.sizes() == Shape{1, 2, 2});
  CHECK(batched.to_vector<float>() == std::vector<float>{1, 5, 4, 11});
}

TEST_CASE("linear with bias (one fused kernel) equals matmul then add, for every dtype and empty dims",
          "[matmul]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (const Shape& sizes : {Shape{5, 7, 3}, Shape{1, 4, 1}, Shape{3, 0, 2}, Shape{0, 3, 2}}) {
      int64_t rows = sizes[0], in_features = sizes[1], out_features = sizes[2];
      INFO(dtype << " rows " << rows << " in " << in_features << " out " << out_features);
      Generator generator(40 + rows + in_features);
      auto random = [&](const Shape& shape) {
        return converted_copy(randn(shape, {}, &generator), dtype, Device::cpu());
      };
      Tensor x = random({rows, in_features}), weight = random({out_features, in_features});
      Tensor bias = random({out_features});
      Tensor fused = linear(x, weight, bias);
      Tensor composite = add(matmul(x, transpose(weight, 0, 1)), bias);
      REQUIRE(fused.sizes() == Shape{rows, out_features});
      REQUIRE(fused.dtype() == dtype);
      // 16-bit: the fused product rounds once, the composite twice.
      double tolerance = dtype == DType::Float16 ? 2e-3 : dtype == DType::BFloat16 ? 2e-2 : 1e-6;
      std::vector<double> got = fused.to_vector<double>(), expected = composite.to_vector<double>();
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(tolerance).margin(tolerance));
    }
  }
  // No output features: an empty result. (Not compared with matmul, whose kernel asserts on
  // the (6, 0) output: core reports is_contiguous() false for it.)
  CHECK(linear(zeros({6, 3}), zeros({0, 3}), zeros({0})).sizes() == Shape{6, 0});
  // A non-contiguous 3-D input is read as rows of its logical order.
  Tensor x = leaf({4, 2, 3}, 50).detach(), weight = leaf({5, 3}, 51).detach(), bias = leaf({5}, 52).detach();
  Tensor fused = linear(transpose(x, 0, 1), weight, bias);
  Tensor composite = add(matmul(transpose(x, 0, 1), transpose(weight, 0, 1)), bias);
  REQUIRE(fused.sizes() == Shape{2, 4, 5});
  std::vector<double> got = fused.to_vector<double>(), expected = composite.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-12));
}

TEST_CASE("matmul and linear reject mismatched operands with clear messages", "[matmul]") {
  CHECK_THROWS_WITH(matmul(empty({2, 3}), empty({4, 5})),
                    "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  CHECK_THROWS_WITH(matmul(empty({2, 3}), empty({3, 5}, {.dtype = DType::Float64})),
                    Catch::Contains("float32") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(matmul(empty({2, 3}, {.dtype = DType::Int64}), empty({3, 5}, {.dtype = DType::Int64})),
                    Catch::Contains("floating") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(matmul(empty({2, 3, 4}), empty({3, 4, 5})), Catch::Contains("[2]") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(linear(empty({128, 784}), empty({256, 512})),
                    "linear: input has 784 features (shape [128, 784]) but weight expects 512 (shape [256, 512])");
  CHECK_THROWS_WITH(linear(empty({128, 512}), empty({256, 512}), empty({512})),
                    Catch::Contains("bias has shape [512]") && Catch::Contains("256"));
}

TEST_CASE("linear saves x and weight only as needed and an INPUT batch stays INPUT", "[matmul]") {
  Tensor x = randn({64, 784}, {.category = MemoryCategory::Input});
  Tensor weight = randn({10, 784}, {.requires_grad = true});
  Tensor bias = zeros({10}, {.requires_grad = true});
  int64_t activation_before = category_bytes(MemoryCategory::Activation);
  int64_t input_before = category_bytes(MemoryCategory::Input);
  Tensor y = linear(x, weight, bias);
  // x is saved (weight's gradient needs it) but keeps its category; weight is not saved,
  // since x needs no gradient; y is not saved at all.
  CHECK(category_bytes(MemoryCategory::Activation) == activation_before);
  CHECK(category_bytes(MemoryCategory::Input) == input_before);
  CHECK(x.memory_category() == MemoryCategory::Input);
  CHECK(y.memory_category() == MemoryCategory::Temporary);

  y.backward(ones_like(y));
  CHECK(category_bytes(MemoryCategory::Activation) == activation_before);
  // d(sum y)/d weight[o, i] = sum_n x[n, i]; d/d bias[o] = 64.
  std::vector<float> x_values = x.to_vector<float>(), grad_weight = weight.grad().to_vector<float>();
  for (int64_t i : {0, 391, 783}) {
    double column_sum = 0;
    for (int64_t n = 0; n < 64; ++n) column_sum += x_values[n * 784 + i];
    CHECK(grad_weight[i] == Approx(column_sum).margin(1e-4));
    CHECK(grad_weight[9 * 784 + i] == Approx(column_sum).margin(1e-4));
  }
  CHECK(bias.grad().to_vector<float>() == std::vector<float>(10, 64.0f));
}
