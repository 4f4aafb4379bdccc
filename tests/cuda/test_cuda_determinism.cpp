// tests/cuda/test_cuda_determinism.cpp — mg::set_deterministic_algorithms on CUDA
// (core/determinism.h): the kernels that add with float atomics by default repeat bit for
// bit when it is on, and still compute the same gradients (within the rounding of another
// order of the sums):
//   embedding backward: 8,192 positions over 37 rows (many repeats each), float32 and
//     bfloat16 tables, against the CPU in float64;
//   fused attention backward: bfloat16 (the tensor-core kernel; head dim 64 without
//     dropout: blocks of 128 keys, with dropout: 64) and float32 (the FMA kernel), causal,
//     a length that is no multiple of the blocks, against the default backward;
//   scatter_add, which has no deterministic form, refuses to run.
// Each deterministic gradient is computed three times and compared byte for byte.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "memgrad/autograd/attention.h"
#include "memgrad/autograd/embedding.h"
#include "memgrad/core/determinism.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "cuda/kernel_checks.h"

using namespace mg;

namespace {

using cuda_checks::host_values;
using cuda_checks::kCuda;

// Turns deterministic algorithms on for a scope.
struct DeterministicScope {
  explicit DeterministicScope(bool on) { set_deterministic_algorithms(on); }
  ~DeterministicScope() { set_deterministic_algorithms(false); }
};

std::vector<unsigned char> bytes_of(const Tensor& tensor) {
  const Tensor host = tensor.contiguous().to(Device::cpu());
  std::vector<unsigned char> bytes(host.numel() * host.element_size());
  std::memcpy(bytes.data(), host.raw_data(), bytes.size());
  return bytes;
}

// max |actual - expected| <= tolerance x max |expected|.
void check_close(const Tensor& actual, const Tensor& expected, double tolerance, const std::string& what) {
  INFO(what);
  const std::vector<double> got = host_values(actual), want = host_values(expected);
  REQUIRE(got.size() == want.size());
  double scale = 0.0, worst = 0.0;
  for (double value : want) scale = std::max(scale, std::abs(value));
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  INFO("largest difference " << worst << " against scale " << scale);
  CHECK(worst <= tolerance * scale);
}

Tensor normal_values(const Shape& sizes, DType dtype, uint64_t seed, Device device) {
  Generator generator(seed);
  return converted_copy(randn(sizes, {.dtype = DType::Float64}, &generator), dtype, Device::cpu()).to(device);
}

Tensor embedding_gradient(const Tensor& table, const Tensor& indices, const Tensor& grad_output) {
  Tensor weight = table.detach().requires_grad_();
  embedding(weight, indices).backward(grad_output);
  return weight.grad();
}

}  // namespace

TEST_CASE("CUDA embedding backward, deterministic: the same bits every time, the CPU's sums", "[cuda][determinism]") {
  const DType dtype = GENERATE(DType::Float32, DType::BFloat16);
  INFO(dtype_name(dtype));
  const int64_t rows = 37, width = 96, positions = 8192;
  Generator generator(5);
  // Skewed lookups: a third of the positions look up row 0.
  std::vector<int64_t> picked(positions);
  for (int64_t i = 0; i < positions; ++i) picked[i] = i % 3 == 0 ? 0 : (i * 7919) % rows;
  const Tensor indices = from_vector(picked, {positions});
  const Tensor table = normal_values({rows, width}, dtype, 1, Device::cpu());
  const Tensor grad_output = normal_values({positions, width}, dtype, 2, Device::cpu());

  const Tensor expected = embedding_gradient(converted_copy(table, DType::Float64, Device::cpu()), indices,
                                             converted_copy(grad_output, DType::Float64, Device::cpu()));
  const DeterministicScope deterministic(true);
  const Tensor first = embedding_gradient(table.to(kCuda), indices.to(kCuda), grad_output.to(kCuda));
  check_close(first, expected, dtype == DType::BFloat16 ? 1e-2 : 1e-5, "deterministic against the CPU in float64");
  for (int again = 0; again < 2; ++again) {
    CHECK(bytes_of(embedding_gradient(table.to(kCuda), indices.to(kCuda), grad_output.to(kCuda))) == bytes_of(first));
  }
}

TEST_CASE("CUDA fused attention backward, deterministic: the same bits every time, the default's values",
          "[cuda][determinism]") {
  const DType dtype = GENERATE(DType::BFloat16, DType::Float32);
  const double dropout_p = GENERATE(0.0, 0.2);
  INFO(dtype_name(dtype) << " dropout " << dropout_p);
  const int64_t batch = 2, heads = 3, length = 300, head_dim = 64;
  const Tensor q = normal_values({batch, heads, length, head_dim}, dtype, 11, kCuda);
  const Tensor k = normal_values({batch, heads, length, head_dim}, dtype, 12, kCuda);
  const Tensor v = normal_values({batch, heads, length, head_dim}, dtype, 13, kCuda);
  const Tensor grad_output = normal_values({batch, heads, length, head_dim}, dtype, 14, kCuda);
  auto gradients = [&] {
    Tensor q_leaf = q.detach().requires_grad_(), k_leaf = k.detach().requires_grad_(),
           v_leaf = v.detach().requires_grad_();
    Generator generator(3);  // the same dropout mask every time
    scaled_dot_product_attention(q_leaf, k_leaf, v_leaf,
                                 {.is_causal = true,
                                  .dropout_p = dropout_p,
                                  .backend = AttentionBackend::Fused,
                                  .generator = &generator})
        .backward(grad_output);
    return std::vector<Tensor>{q_leaf.grad(), k_leaf.grad(), v_leaf.grad()};
  };
  const std::vector<Tensor> by_default = gradients();
  const DeterministicScope deterministic(true);
  const std::vector<Tensor> first = gradients();
  const char* names[] = {"grad_q", "grad_k", "grad_v"};
  for (int i = 0; i < 3; ++i) {
    check_close(first[i], by_default[i], dtype == DType::BFloat16 ? 1e-2 : 1e-5,
                std::string(names[i]) + ": deterministic against the default");
  }
  for (int again = 0; again < 2; ++again) {
    const std::vector<Tensor> repeated = gradients();
    for (int i = 0; i < 3; ++i) {
      INFO(names[i]);
      CHECK(bytes_of(repeated[i]) == bytes_of(first[i]));
    }
  }
}

TEST_CASE("CUDA scatter_add refuses to run under deterministic algorithms, naming itself", "[cuda][determinism]") {
  const Tensor source = ones({4}, {.device = kCuda});
  const Tensor index = from_vector(std::vector<int64_t>{0, 1, 1, 0}, {4}).to(kCuda);
  const Tensor destination = zeros({2}, {.device = kCuda});
  const DeterministicScope deterministic(true);
  CHECK_THROWS_WITH(kernels(kCuda).scatter_add(source, 0, index, destination),
                    Catch::Contains("scatter_add") && Catch::Contains("set_deterministic_algorithms"));
}
