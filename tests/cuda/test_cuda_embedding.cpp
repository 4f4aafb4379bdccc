// tests/cuda/test_cuda_embedding.cpp — the CUDA embedding kernels against the CPU ones on
// fresh random tables (duplicate indices, padding_idx, int32 indices, rows that do and do
// not allow vector copies, every floating dtype), and the device-side index check: an
// out-of-range index raises mg::Error at the next synchronisation (cuda::synchronize,
// Stream::synchronize, a copy to the host), its row reads as zeros, and the device stays
// usable afterwards.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/embedding.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/factory.h"
#include "cuda/kernel_checks.h"
#include "memgrad/cuda/runtime.h"

using namespace mg;

namespace {

using cuda_checks::check_within_scale;
using cuda_checks::error_text;
using cuda_checks::host_values;
using cuda_checks::kCuda;
using cuda_checks::random_values;

// `count` indices in [0, rows), many of them repeated (a few rows drawn often).
std::vector<int64_t> random_indices(int64_t count, int64_t rows, uint64_t seed) {
  Generator generator(seed);
  std::vector<int64_t> indices = randint(0, rows, {count}, {.dtype = DType::Int64}, &generator).to_vector<int64_t>();
  for (int64_t n = 0; n < count; n += 3) indices[n] = indices[n] % 4;  // rows 0..3 appear often
  return indices;
}

struct Case {
  int64_t rows, width, count;
  DType dtype;
};

}  // namespace

TEST_CASE("CUDA embedding matches the CPU: rows copied, duplicate and padding gradients summed", "[cuda]") {
  auto [rows, width, count, dtype] =
      GENERATE(Case{50, 64, 300, DType::Float32}, Case{50, 33, 300, DType::Float32}, Case{1000, 768, 4096, DType::Float32},
               Case{50, 64, 300, DType::Float64}, Case{50, 64, 300, DType::Float16}, Case{50, 33, 300, DType::Float16},
               Case{1000, 768, 4096, DType::BFloat16}, Case{7, 5, 2000, DType::BFloat16});
  const int64_t padding = GENERATE(int64_t{-1}, int64_t{2});
  INFO("table (" << rows << ", " << width << ") " << dtype << ", " << count << " indices, padding_idx " << padding);
  // Sums of up to ~count / 4 gradients: float32 adds in another order; 16-bit results are
  // both rounded once from float sums, so they differ by about an ulp.
  const double relative = dtype == DType::Float64 ? 1e-12
                          : dtype == DType::Float32 ? 1e-5
                          : dtype == DType::Float16 ? 2e-3
                                                    : 1.6e-2;
  Tensor weight = random_values({rows, width}, dtype, 1).requires_grad_();
  Tensor cuda_weight = weight.detach().to(kCuda).requires_grad_();
  std::vector<int64_t> values = random_indices(count, rows, 2);
  Tensor indices = from_vector<int64_t>(values, {count / 4, 4});
  for (bool int32 : {false, true}) {
    INFO("int32 indices " << int32);
    Tensor cpu_indices = int32 ? indices.to(DType::Int32) : indices;
    Tensor cpu_out = embedding(weight, cpu_indices, padding);
    Tensor cuda_out = embedding(cuda_weight, cpu_indices.to(kCuda), padding);
    CHECK(cuda_out.sizes() == Shape{count / 4, 4, width});
    check_within_scale(cuda_out, cpu_out, 0.0);  // a copy: exact
    Tensor grad_output = random_values(cpu_out.sizes(), dtype, 3);
    sum(mul(cpu_out, grad_output)).backward();
    sum(mul(cuda_out, grad_output.to(kCuda))).backward();
    check_within_scale(cuda_weight.grad(), weight.grad(), relative);
    if (padding >= 0) {
      std::vector<double> padding_grad = host_values(cuda_weight.grad());
      for (int64_t d = 0; d < width; ++d) CHECK(padding_grad[padding * width + d] == 0.0);
    }
    weight.set_grad(Tensor());
    cuda_weight.set_grad(Tensor());
  }
}

TEST_CASE("CUDA embedding kernels at a misaligned offset take the scalar path", "[cuda]") {
  // A view one element into its buffer: no 16-byte vector is aligned.
  Tensor base = random_values({1 + 40 * 16}, DType::Float32, 4);
  Tensor weight = make_view(base, {40, 16}, {16, 1}, 1);
  Tensor indices = from_vector<int64_t>({39, 0, 5, 5, 17});
  Tensor cpu_out = embedding(weight, indices);
  Tensor cuda_base = base.to(kCuda);
  Tensor cuda_out = embedding(make_view(cuda_base, {40, 16}, {16, 1}, 1), indices.to(kCuda));
  check_within_scale(cuda_out, cpu_out, 0.0);
}

TEST_CASE("CUDA embedding reports an out-of-range index at the next synchronisation", "[cuda]") {
  const int64_t rows = 50304, width = 768;
  Generator generator(5);
  Tensor weight = randn({rows, width}, {.device = kCuda}, &generator);
  // Table row r on the host.
  auto table_row = [&](int64_t r) { return host_values(weight.narrow(0, r, 1)); };
  Tensor indices = from_vector<int64_t>({1, 2, 3, 4, 5, 70000, 7, 8}, {2, 4}).to(kCuda);
  Tensor out;
  // The op itself does not wait for the device, so it cannot know yet.
  CHECK_NOTHROW(out = embedding(weight, indices));
  std::string message = error_text([] { cuda::synchronize(); });
  INFO(message);
  CHECK(message.find("embedding: index 70000 is out of range for an embedding of 50304 rows (weight shape [50304, "
                     "768]); it is at position 5 of the flattened indices") != std::string::npos);
  CHECK(message.find("Hint: every index must lie in [0, 50304)") != std::string::npos);
  // Reported once: the record is clear again, and the device works.
  CHECK_NOTHROW(cuda::synchronize());
  std::vector<double> got = host_values(out), row_8 = table_row(8);
  for (int64_t d = 0; d < width; ++d) {
    CHECK(got[5 * width + d] == 0.0);         // the bad row reads as zeros
    CHECK(got[7 * width + d] == row_8[d]);  // the others as usual
  }

  SECTION("raised by a copy to the host") {
    Tensor bad = embedding(weight, from_vector<int64_t>({-3, 4}).to(kCuda));
    message = error_text([&] { bad.to(Device::cpu()); });
    CHECK(message.find("embedding: index -3 is out of range for an embedding of 50304 rows") != std::string::npos);
    std::vector<double> rows_read = host_values(bad);  // the copy works once reported
    CHECK(rows_read[0] == 0.0);
    CHECK(rows_read[width] == table_row(4)[0]);
  }
  SECTION("raised by Stream::synchronize, on a stream of its own") {
    cuda::Stream stream(kCuda);
    {
      cuda::StreamGuard on_stream(stream);
      embedding(weight, from_vector<int64_t>({rows}).to(kCuda));
    }
    message = error_text([&] { stream.synchronize(); });
    CHECK(message.find("index 50304 is out of range") != std::string::npos);
    CHECK_NOTHROW(stream.synchronize());
  }
  SECTION("the first of several bad indices is reported, once") {
    embedding(weight, from_vector<int64_t>({rows + 1, rows + 2, -1}).to(kCuda));
    message = error_text([] { cuda::synchronize(); });
    CHECK(message.find("embedding: index ") != std::string::npos);
    CHECK(message.find("is out of range for an embedding of 50304 rows") != std::string::npos);
    CHECK_NOTHROW(cuda::synchronize());
  }
  SECTION("gradients skip the bad row and never write outside the table") {
    Tensor leaf = weight.detach().requires_grad_();
    Tensor looked_up = embedding(leaf, from_vector<int64_t>({3, rows + 5, 3}).to(kCuda));
    CHECK_THROWS_AS(cuda::synchronize(), Error);
    sum(looked_up).backward();
    std::vector<double> row_3 = host_values(leaf.grad().narrow(0, 3, 1));
    CHECK(std::count(row_3.begin(), row_3.end(), 2.0) == width);
    CHECK(sum(leaf.grad()).item<double>() == 2.0 * width);  // nothing anywhere else
  }
}
