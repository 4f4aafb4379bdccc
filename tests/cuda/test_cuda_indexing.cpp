// tests/cuda/test_cuda_indexing.cpp — the CUDA gather and scatter_add kernels (behind
// index_select, gather and Tensor::index) against the CPU ones on fresh random inputs:
// every dtype moved exactly, in contiguous, transposed and strided layouts and along every
// dim; gradients (repeated indices summed with atomics, 16-bit ones in float32) within a
// tolerance of the CPU's ordered sums; and an out-of-range index reported at the next
// synchronisation, its element written as zero, the device usable afterwards.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "cuda/kernel_checks.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/indexing.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/factory.h"
#include "memgrad/cuda/runtime.h"

using namespace mg;
using namespace mg::indexing;

namespace {

using cuda_checks::check_equal;
using cuda_checks::check_within_scale;
using cuda_checks::error_text;
using cuda_checks::kAllTypes;
using cuda_checks::kCuda;
using cuda_checks::Layout;
using cuda_checks::layout_name;
using cuda_checks::random_pair;
using cuda_checks::random_values;

// `count` int64 indices in [0, bound), a few values drawn often (repeats to sum).
Tensor random_index(const Shape& sizes, int64_t bound, uint64_t seed) {
  Generator generator(seed);
  std::vector<int64_t> values = randint(0, bound, sizes, {.dtype = DType::Int64}, &generator).to_vector<int64_t>();
  for (size_t n = 0; n < values.size(); n += 3) values[n] %= 2;
  return from_vector(values, sizes);
}

}  // namespace

TEST_CASE("CUDA index_select and gather move every dtype exactly as the CPU does", "[cuda][indexing]") {
  const Shape sizes = {6, 5, 7};
  for (DType dtype : kAllTypes) {
    for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
      cuda_checks::Pair input = random_pair(sizes, dtype, 21, layout);
      for (int dim = 0; dim < 3; ++dim) {
        INFO(dtype << ", " << layout_name(layout) << ", dim " << dim);
        Tensor rows = random_index({9}, sizes[dim], 22 + dim);
        check_equal(input.cuda.index_select(dim, rows.to(kCuda)), input.cpu.index_select(dim, rows), "index_select");
        Shape index_sizes = sizes;
        index_sizes[dim] = 11;  // longer than the input along dim, as gather allows
        index_sizes[(dim + 1) % 3] -= 1;  // shorter in another dim
        Tensor picks = random_index(index_sizes, sizes[dim], 30 + dim);
        check_equal(input.cuda.gather(dim, picks.to(kCuda)), input.cpu.gather(dim, picks), "gather");
        // A transposed (strided) index.
        Tensor square = random_index({5, 5, 5}, std::min<int64_t>(sizes[dim], 5), 40 + dim).transpose(0, 2);
        check_equal(input.cuda.gather(dim, square.to(kCuda)), input.cpu.gather(dim, square), "gather, strided index");
      }
    }
  }
}

TEST_CASE("CUDA index_select and gather gradients match the CPU's sums", "[cuda][indexing]") {
  struct Case {
    DType dtype;
    double relative;
  };
  for (Case c : {Case{DType::Float32, 1e-6}, Case{DType::Float64, 1e-12}, Case{DType::Float16, 2e-3},
                 Case{DType::BFloat16, 1e-2}}) {
    INFO(c.dtype);
    Tensor input = random_values({300, 64}, c.dtype, 51).requires_grad_();
    Tensor cuda_input = input.detach().to(kCuda).requires_grad_();
    Tensor rows = random_index({4000}, 300, 52);  // many repeats: atomics on the device
    Tensor grad_rows = random_values({4000, 64}, c.dtype, 53);
    sum(mul(input.index_select(0, rows), grad_rows)).backward();
    sum(mul(cuda_input.index_select(0, rows.to(kCuda)), grad_rows.to(kCuda))).backward();
    check_within_scale(cuda_input.grad(), input.grad(), c.relative, "index_select backward");

    Tensor picks = random_index({300, 200}, 64, 54);
    Tensor grad_picks = random_values({300, 200}, c.dtype, 55);
    input.set_grad(Tensor());
    cuda_input.set_grad(Tensor());
    sum(mul(input.gather(1, picks), grad_picks)).backward();
    sum(mul(cuda_input.gather(1, picks.to(kCuda)), grad_picks.to(kCuda))).backward();
    check_within_scale(cuda_input.grad(), input.grad(), c.relative, "gather backward");
  }
}

TEST_CASE("CUDA Tensor::index with slices and a tensor entry matches the CPU", "[cuda][indexing]") {
  Tensor x = random_values({4, 6, 5}, DType::Float32, 61).requires_grad_();
  Tensor cuda_x = x.detach().to(kCuda).requires_grad_();
  Tensor rows = from_vector<int64_t>({5, 0, 5, 2});
  std::vector<TensorIndex> cpu_indices = {Slice(1, None, 2), rows, None, Ellipsis, -1};
  std::vector<TensorIndex> cuda_indices = {Slice(1, None, 2), rows.to(kCuda), None, Ellipsis, -1};
  check_equal(cuda_x.index(cuda_indices), x.index(cpu_indices), "index");
  sum(x.index(cpu_indices)).backward();
  sum(cuda_x.index(cuda_indices)).backward();
  check_within_scale(cuda_x.grad(), x.grad(), 1e-6, "index backward");
}

TEST_CASE("CUDA gather reports an out-of-range index at the next synchronisation", "[cuda][indexing]") {
  Tensor x = random_values({3, 4}, DType::Float32, 71).to(kCuda);
  Tensor out;
  // The op does not wait for the device, so it cannot know yet.
  CHECK_NOTHROW(out = x.index_select(1, from_vector<int64_t>({1, 9, 2}).to(kCuda)));
  std::string message = error_text([] { cuda::synchronize(); });
  INFO(message);
  CHECK(message.find("gather / index_select: index 9 is out of range for dimension 1 of size 4") != std::string::npos);
  CHECK_NOTHROW(cuda::synchronize());  // reported once; the device works
  std::vector<double> got = cuda_checks::host_values(out), expected = cuda_checks::host_values(x);
  for (int64_t row = 0; row < 3; ++row) {
    CHECK(got[row * 3 + 0] == expected[row * 4 + 1]);
    CHECK(got[row * 3 + 1] == 0.0);  // the bad index reads as zero
    CHECK(got[row * 3 + 2] == expected[row * 4 + 2]);
  }
}
