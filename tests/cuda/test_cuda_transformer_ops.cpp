// tests/cuda/test_cuda_transformer_ops.cpp — the CUDA masked_fill, topk and multinomial
// kernels against the CPU ones on fresh random inputs: masked_fill in every floating
// dtype with broadcast masks and strided inputs (exact: it only selects); topk on random
// rows from 1 to 50304 entries with k from 1 to 200 (and k past the shared-memory sort),
// ties, NaN, largest and smallest (values and indices exact); multinomial drawing the same
// samples on both devices from the same seed; and the gradients of masked_fill, topk and
// split on the GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/masked_fill.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/split.h"
#include "memgrad/autograd/topk.h"
#include "memgrad/core/factory.h"
#include "cuda/kernel_checks.h"

using namespace mg;
using cuda_checks::check_equal;
using cuda_checks::host_values;
using cuda_checks::kCuda;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The same bytes on the GPU (no conversion on either side).
Tensor on_cuda(const Tensor& tensor) { return converted_copy(tensor, tensor.dtype(), Device::cuda()); }

// A random bool mask of `sizes` (about half true).
Tensor random_mask(const Shape& sizes, uint64_t seed) {
  return gt(cuda_checks::random_values(sizes, DType::Float32, seed), 0.0);
}

// Random rows in `dtype`: normal values, or small integers (many ties) when `ties`.
Tensor random_rows(int64_t rows, int64_t n, DType dtype, uint64_t seed, bool ties) {
  using cuda_checks::Values;
  return cuda_checks::random_values({rows, n}, dtype, seed, ties ? Values::SmallIntegers : Values::Normal);
}

void check_topk(const Tensor& cpu_input, int64_t k, bool largest, const std::string& what) {
  auto [cpu_values, cpu_indices] = topk(cpu_input, k, -1, largest);
  auto [cuda_values, cuda_indices] = topk(on_cuda(cpu_input), k, -1, largest);
  check_equal(cuda_values, cpu_values, what + " values");
  check_equal(cuda_indices, cpu_indices, what + " indices");
}

}  // namespace

TEST_CASE("CUDA masked_fill matches the CPU for broadcast masks and strided inputs", "[cuda][masked_fill]") {
  using cuda_checks::Layout;
  DType dtype = GENERATE(DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int64);
  Layout layout = GENERATE(Layout::Contiguous, Layout::Transposed, Layout::Strided);
  Shape sizes{3, 37, 45};
  cuda_checks::Pair input = cuda_checks::random_pair(sizes, dtype, 1, layout);
  for (const Shape& mask_sizes : {Shape{3, 37, 45}, Shape{37, 45}, Shape{37, 1}, Shape{1, 1, 45}, Shape{}}) {
    Tensor mask = random_mask(mask_sizes, 2);
    // (-inf has no integer value.)
    for (double value : {is_floating(dtype) ? -kInf : -7.0, 2.5, 0.0}) {
      std::string what = std::string(dtype_name(dtype)) + " " + cuda_checks::layout_name(layout) + " mask " +
                         mask_sizes.str() + " value " + std::to_string(value);
      Tensor expected = masked_fill(input.cpu, mask, value);
      Tensor actual = masked_fill(input.cuda, on_cuda(mask), value);
      CHECK(actual.is_contiguous());
      check_equal(actual, expected, what);
    }
  }
}

TEST_CASE("CUDA topk matches the CPU on random rows, vocabulary-sized ones included", "[cuda][topk]") {
  DType dtype = GENERATE(DType::Float32, DType::Float16, DType::BFloat16, DType::Float64);
  bool ties = GENERATE(false, true);
  uint64_t seed = 10;
  // Whole rows sorted in shared memory (n <= 4096), and rows selected by radix first.
  for (int64_t n : {1, 7, 100, 1000, 4096, 4097, 50304}) {
    for (int64_t k : {1, 2, 5, 50, 200}) {
      if (k > n) continue;
      for (bool largest : {true, false}) {
        check_topk(random_rows(3, n, dtype, ++seed, ties), k, largest,
                   std::string(dtype_name(dtype)) + (ties ? " ties" : "") + " n " + std::to_string(n) + " k " +
                       std::to_string(k) + (largest ? " largest" : " smallest"));
      }
    }
  }
}

TEST_CASE("CUDA topk sorts more than fit in shared memory, integers, NaN and -0", "[cuda][topk]") {
  // k beyond the shared-memory buffer: the selected entries are sorted in the output.
  check_topk(random_rows(2, 50304, DType::Float32, 30, false), 5000, true, "k 5000 of 50304");
  check_topk(random_rows(2, 5000, DType::BFloat16, 31, true), 5000, false, "k = n = 5000, ties");
  check_topk(random_rows(4, 300, DType::Int64, 32, true), 40, true, "int64");
  check_topk(random_rows(4, 300, DType::Int32, 33, false), 40, false, "int32");

  std::vector<double> special(6000);
  for (size_t i = 0; i < special.size(); ++i) {
    double pattern[] = {kNaN, 0.0, -0.0, kInf, -kInf, 1.5, -2.0};
    special[i] = pattern[(i + i / 5) % 7];
  }
  for (int64_t n : {60, 6000}) {
    Tensor rows = from_vector<double>(std::vector<double>(special.begin(), special.begin() + n), {1, n});
    for (DType dtype : {DType::Float32, DType::Float16}) {
      Tensor typed = converted_copy(rows, dtype, Device::cpu());
      check_topk(typed, std::min<int64_t>(n, 100), true, "NaN/inf/-0 largest n " + std::to_string(n));
      check_topk(typed, std::min<int64_t>(n, 100), false, "NaN/inf/-0 smallest n " + std::to_string(n));
    }
  }
}

TEST_CASE("CUDA multinomial draws the CPU's samples from the same seed", "[cuda][multinomial]") {
  DType dtype = GENERATE(DType::Float32, DType::Float64, DType::Float16);
  for (int64_t n : {1, 5, 1000, 50304}) {
    // Random positive weights, about a fifth of them zeroed (a normal value below -0.85),
    // but never a single category's.
    Tensor weights = cuda_checks::random_values({4, n}, DType::Float64, 40 + n, cuda_checks::Values::Positive);
    if (n > 1) {
      Tensor zeroed = lt(cuda_checks::random_values({4, n}, DType::Float32, 41 + n), -0.85);
      weights = masked_fill(weights, zeroed, 0.0);
    }
    weights = converted_copy(weights, dtype, Device::cpu());
    for (int64_t samples : {1, 7, 1000}) {
      for (bool replacement : {true, false}) {
        if (!replacement && samples > n) continue;
        Generator cpu_generator(7 + samples), cuda_generator(7 + samples);
        std::string what = std::string(dtype_name(dtype)) + " n " + std::to_string(n) + " samples " +
                           std::to_string(samples) + (replacement ? " with" : " without") + " replacement";
        Tensor expected = multinomial(weights, samples, replacement, &cpu_generator);
        Tensor actual = multinomial(on_cuda(weights), samples, replacement, &cuda_generator);
        check_equal(actual, expected, what);
        CHECK(cpu_generator.state().offset == cuda_generator.state().offset);
      }
    }
  }
}

TEST_CASE("CUDA gradients of masked_fill, topk and split match the CPU", "[cuda][masked_fill][topk][split]") {
  Tensor x = cuda_checks::random_values({4, 6, 300}, DType::Float32, 50);
  Tensor mask = random_mask({6, 1}, 51);
  Tensor weights = cuda_checks::random_values({4, 6, 300}, DType::Float32, 52);
  auto gradient = [&](Device device) {
    Tensor leaf = converted_copy(x, DType::Float32, device);
    leaf.requires_grad_();
    Tensor filled = masked_fill(leaf, converted_copy(mask, DType::Bool, device), -1.0);
    std::vector<Tensor> pieces = split(filled, std::vector<int64_t>{100, 150, 50}, -1);
    Tensor top = std::get<0>(topk(pieces[1], 3, 1));  // along a middle dim: (4, 3, 150)
    Tensor loss = add(sum(mul(pieces[0], converted_copy(narrow(weights, 2, 0, 100), DType::Float32, device))),
                      sum(mul(top, top)));
    loss.backward();
    return leaf.grad();
  };
  Tensor cpu_grad = gradient(Device::cpu());
  Tensor cuda_grad = gradient(kCuda);
  cuda_checks::check_close(cuda_grad, cpu_grad, 1e-6, "masked_fill -> split -> topk gradient");
}
