// tests/autograd/test_linear_cross_entropy.cpp — linear_cross_entropy against
// cross_entropy(linear(...)): values and both gradients in float64 for every reduction,
// ignore_index, label smoothing and chunkings (one chunk, equal chunks, a short last
// chunk, one row each); gradcheck; autocast's float32 loss; what the node keeps (no
// logits); and the errors.
#include <catch2/catch.hpp>

#include <vector>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/linear_cross_entropy.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"
#include "autograd/tensor_checks.h"

using namespace mg;
using mg_test::max_abs_difference;

namespace {

struct Head {
  Tensor hidden, weight, target;
};

// N = 7 rows, C = 5 features, V = 11 classes; target 2 is ignored.
Head make_head(DType dtype, uint64_t seed) {
  Generator generator(seed);
  return {mul(randn({7, 5}, {.dtype = dtype}, &generator), 1.5).detach().requires_grad_(),
          randn({11, 5}, {.dtype = dtype}, &generator).requires_grad_(),
          from_vector<int64_t>({3, 10, -100, 0, 7, 7, 1})};
}

void check_close(const Tensor& got, const Tensor& expected, double tolerance) {
  REQUIRE(got.sizes() == expected.sizes());
  std::vector<double> a = to(got, DType::Float64).to_vector<double>(), b = to(expected, DType::Float64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    CHECK(a[i] == Approx(b[i]).margin(tolerance).epsilon(tolerance));
  }
}

}  // namespace

TEST_CASE("linear_cross_entropy equals cross_entropy(linear) in value and both gradients, for any chunking",
          "[linear_cross_entropy]") {
  // 11 classes x 8 bytes = 88 bytes a row: chunk_bytes picks 1, 3 (3+3+1), 4 (2+2+2+1) and 7 chunks.
  for (int64_t chunk_bytes : {int64_t{1} << 20, int64_t{88} * 3, int64_t{88} * 2, int64_t{1}}) {
    for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      for (double smoothing : {0.0, 0.2}) {
        INFO("chunk_bytes " << chunk_bytes << " reduction " << static_cast<int>(reduction) << " smoothing "
                            << smoothing);
        CrossEntropyOptions options{.reduction = reduction, .label_smoothing = smoothing};
        Head fused = make_head(DType::Float64, 1), plain = make_head(DType::Float64, 1);
        Tensor loss = linear_cross_entropy(fused.hidden, fused.weight, fused.target, options, chunk_bytes);
        Tensor expected = cross_entropy(linear(plain.hidden, plain.weight), plain.target, options);
        check_close(loss, expected, 1e-12);
        // A gradient other than 1, so the scaling in the backward is tested too.
        Tensor seed = mul(ones(loss.sizes(), {.dtype = DType::Float64}), 0.75);
        loss.backward(seed);
        expected.backward(seed);
        check_close(fused.hidden.grad(), plain.hidden.grad(), 1e-12);
        check_close(fused.weight.grad(), plain.weight.grad(), 1e-12);
      }
    }
  }
}

TEST_CASE("linear_cross_entropy passes gradcheck in float64", "[linear_cross_entropy]") {
  Head head = make_head(DType::Float64, 2);
  for (Reduction reduction : {Reduction::Mean, Reduction::Sum}) {
    // NOTE: as 1-D: gradcheck's seed reads a 0-d output's empty sizes as 1-D.
    auto fn = [&](const std::vector<Tensor>& inputs) {
      return reshape(linear_cross_entropy(inputs[0], inputs[1], head.target,
                                          {.reduction = reduction, .label_smoothing = 0.1}, 88 * 3),
                     {1});
    };
    GradcheckResult result = gradcheck(fn, {head.hidden, head.weight});
    INFO(result.message);
    CHECK(result.passed);
  }
}

TEST_CASE("linear_cross_entropy keeps the two float32 gradients, not the logits, and frees them in backward",
          "[linear_cross_entropy][memory]") {
  const int64_t rows = 64, features = 16, classes = 1000;
  Generator generator(3);
  Tensor hidden = randn({rows, features}, {}, &generator).requires_grad_();
  Tensor weight = randn({classes, features}, {}, &generator).requires_grad_();
  Tensor target = randint(0, classes, {rows}, {.dtype = DType::Int64}, &generator);
  auto bytes = [](MemoryCategory category) { return memory::snapshot(Device::cpu()).category(category).current; };
  auto peak = [](MemoryCategory category) { return memory::snapshot(Device::cpu()).category(category).peak; };
  memory::reset_peak_stats(Device::cpu());
  const int64_t activation_before = bytes(MemoryCategory::Activation);
  const int64_t temporary_before = bytes(MemoryCategory::Temporary);
  const int64_t chunk_bytes = 16 * classes * 4;  // 16 rows of logits at a time
  Tensor loss = linear_cross_entropy(hidden, weight, target, {}, chunk_bytes);
  // Kept: d loss/d hidden and d loss/d weight (float32) and the mean's count; not even the
  // targets.
  const int64_t kept = rows * features * 4 + classes * features * 4;
  CHECK(bytes(MemoryCategory::Activation) - activation_before == kept + 4);
  // The logits never exist whole (rows x classes x 4 = 256,000 bytes): one chunk's buffer,
  // the two sums before they are kept, the CPU's product before it is added (classes x
  // features x 4), and row-sized vectors.
  const int64_t bound = chunk_bytes + kept + classes * features * 4 + 4 * rows * 8;
  CHECK(peak(MemoryCategory::Temporary) - temporary_before <= bound);
  CHECK(bound < rows * classes * 4);
  loss.backward();
  CHECK(bytes(MemoryCategory::Activation) == activation_before);
}

TEST_CASE("linear_cross_entropy under autocast multiplies in bfloat16 and returns a float32 loss",
          "[linear_cross_entropy][autocast]") {
  Head fused = make_head(DType::Float32, 4), plain = make_head(DType::Float32, 4);
  Tensor loss, expected;
  {
    amp::AutocastGuard autocast(DType::BFloat16, DeviceType::CPU);
    loss = linear_cross_entropy(fused.hidden, fused.weight, fused.target, {}, 88);
    expected = cross_entropy(linear(plain.hidden, plain.weight), plain.target);
  }
  CHECK(loss.dtype() == DType::Float32);
  check_close(loss, expected, 1e-6);
  loss.backward();
  expected.backward();
  CHECK(fused.weight.grad().dtype() == DType::Float32);
  // The same products on the same bfloat16 operands; the plain chain rounds its gradients
  // to bfloat16 on their way back through autocast's casts, the fused op does not.
  check_close(fused.hidden.grad(), plain.hidden.grad(), 1e-2);
  check_close(fused.weight.grad(), plain.weight.grad(), 1e-2);
  for (const Tensor& grad : {fused.hidden.grad(), fused.weight.grad()}) {
    CHECK(max_abs_difference(grad, to(to(grad, DType::BFloat16), DType::Float32)) > 0.0);
  }
  for (const Tensor& grad : {plain.hidden.grad(), plain.weight.grad()}) {
    CHECK(max_abs_difference(grad, to(to(grad, DType::BFloat16), DType::Float32)) == 0.0);
  }
}

TEST_CASE("linear_cross_entropy without grad computes only the loss", "[linear_cross_entropy]") {
  Head head = make_head(DType::Float32, 5);
  NoGradGuard no_grad;
  Tensor loss = linear_cross_entropy(head.hidden, head.weight, head.target, {}, 88);
  CHECK_FALSE(loss.requires_grad());
  check_close(loss, cross_entropy(linear(head.hidden, head.weight), head.target), 1e-6);
}

TEST_CASE("linear_cross_entropy rejects mismatched shapes, dtypes and targets, naming them",
          "[linear_cross_entropy]") {
  Head head = make_head(DType::Float32, 6);
  CHECK_THROWS_WITH(linear_cross_entropy(head.hidden, head.weight.t(), head.target),
                    Catch::Contains("hidden (N, C) and weight (V, C)") && Catch::Contains("[5, 11]"));
  CHECK_THROWS_WITH(linear_cross_entropy(to(head.hidden, DType::Float64), head.weight, head.target),
                    Catch::Contains("float64") && Catch::Contains("float32"));
  CHECK_THROWS_WITH(linear_cross_entropy(head.hidden, head.weight, to(head.target, DType::Int32)),
                    Catch::Contains("int64"));
  CHECK_THROWS_WITH(linear_cross_entropy(head.hidden, head.weight, from_vector<int64_t>({1, 2})),
                    Catch::Contains("does not match hidden of shape [7, 5]"));
  CHECK_THROWS_WITH(linear_cross_entropy(head.hidden, head.weight, head.target, {}, 0),
                    Catch::Contains("chunk_bytes"));
}
