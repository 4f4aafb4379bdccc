// tests/cuda/test_cuda_reduce_softmax.cpp — the CUDA reductions (sum, mean, amax, min,
// max along a dim, argmax), softmax / log_softmax with their gradients, and the
// nll / fused cross_entropy kernels, each against the CPU kernels on fresh random inputs:
// every dim set of 3-D tensors, strided and expanded inputs, odd sizes (1, 7, 1000, 4097),
// the large shapes that split work across blocks (a 4096 x 512 column sum, a 2^22-element
// sum), NaN and infinity rules, ties, and integer dtypes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/softmax.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/memory/snapshot.h"
#include "cuda/kernel_checks.h"

using namespace mg;

namespace {

using cuda_checks::host_values;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor normal(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = dtype}, &generator);
}

Tensor uniform(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return rand(sizes, {.dtype = dtype}, &generator);
}

// Small integers (many ties) as `dtype`.
Tensor small_integers(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return converted_copy(randint(-3, 4, sizes, {.dtype = DType::Int64}, &generator), dtype, Device::cpu());
}

// The same bytes on the GPU (no conversion on either side).
Tensor on_cuda(const Tensor& tensor) { return converted_copy(tensor, tensor.dtype(), Device::cuda()); }

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-5;
    case DType::Float16:
    case DType::BFloat16: return 2e-2;
    default: return 0.0;  // integers and bool: exact
  }
}

// Checks a CUDA result against the CPU's: same sizes and dtype; NaN where the CPU has NaN,
// the same infinities, and finite values within `relative` of the largest finite
// |value| (at least 1).
void check_matches(const Tensor& cuda_result, const Tensor& cpu_result, double relative) {
  REQUIRE(cuda_result.device().is_cuda());
  REQUIRE(cuda_result.sizes() == cpu_result.sizes());
  REQUIRE(cuda_result.dtype() == cpu_result.dtype());
  std::vector<double> got = host_values(cuda_result), expected = host_values(cpu_result);
  double scale = 1.0;
  for (double value : expected) {
    if (std::isfinite(value)) scale = std::max(scale, std::abs(value));
  }
  int64_t special_mismatches = 0, worst_at = -1;
  double worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!std::isfinite(expected[i]) || !std::isfinite(got[i])) {
      bool same = (std::isnan(expected[i]) && std::isnan(got[i])) || expected[i] == got[i];
      if (!same) {
        ++special_mismatches;
        worst_at = static_cast<int64_t>(i);
      }
      continue;
    }
    double error = std::abs(got[i] - expected[i]);
    if (error > worst) worst = error, worst_at = static_cast<int64_t>(i);
  }
  INFO("shape " << cpu_result.sizes() << " " << cpu_result.dtype() << ": worst error " << worst << " (allowed "
                << relative * scale << ") at flat index " << worst_at << ": CUDA "
                << (worst_at >= 0 ? got[worst_at] : 0.0) << " vs CPU " << (worst_at >= 0 ? expected[worst_at] : 0.0)
                << "; NaN/inf mismatches " << special_mismatches);
  CHECK(special_mismatches == 0);
  CHECK(worst <= relative * scale);
}

void check_matches(const Tensor& cuda_result, const Tensor& cpu_result) {
  check_matches(cuda_result, cpu_result, tolerance(cpu_result.dtype()));
}

// Every subset of {0, 1, 2}, the empty one meaning "all" (as sum(x, {}) does).
const std::vector<std::vector<int64_t>> kDimSets = {{}, {0}, {1}, {2}, {0, 1}, {1, 2}, {0, 2}, {0, 1, 2}};

}  // namespace

TEST_CASE("cuda sum, mean and amax match the CPU over every dim set", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& sizes : {Shape{5, 7, 33}, Shape{1, 4097, 3}, Shape{1000, 1, 7}, Shape{2, 1030, 5}}) {
      Tensor x = normal(sizes, dtype, 11 + sizes[0]);
      Tensor x_gpu = on_cuda(x);
      for (const auto& dims : kDimSets) {
        for (bool keepdim : {false, true}) {
          INFO("sizes " << sizes << " " << dtype << " dims " << dims.size() << " keepdim " << keepdim);
          check_matches(sum(x_gpu, dims, keepdim), sum(x, dims, keepdim));
          check_matches(mean(x_gpu, dims, keepdim), mean(x, dims, keepdim));
          check_matches(amax(x_gpu, dims, keepdim), amax(x, dims, keepdim));
        }
      }
    }
  }
}

TEST_CASE("cuda reductions of transposed, sliced and expanded inputs", "[cuda]") {
  Tensor x = normal({6, 9, 40}, DType::Float32, 3);
  Tensor x_gpu = on_cuda(x);
  for (const auto& dims : kDimSets) {
    INFO("dims " << dims.size());
    // Not contiguous: the reduced dims may or may not fold into one stride.
    check_matches(sum(x_gpu.transpose(0, 2), dims), sum(x.transpose(0, 2), dims));
    check_matches(amax(x_gpu.permute({1, 2, 0}), dims), amax(x.permute({1, 2, 0}), dims));
    check_matches(sum(x_gpu.slice(2, 1, 40, 3), dims), sum(x.slice(2, 1, 40, 3), dims));
  }
  // Expanded (stride 0) over the reduced dim, as a broadcast gradient is.
  Tensor row = normal({1, 33}, DType::Float64, 4);
  check_matches(sum(on_cuda(row).expand({500, 33}), {0}), sum(row.expand({500, 33}), {0}));
  check_matches(sum(on_cuda(row).expand({500, 33}), {1}), sum(row.expand({500, 33}), {1}));
  // A transposed matrix reduced along its memory-contiguous dim and across it.
  Tensor matrix = normal({300, 77}, DType::Float32, 5);
  check_matches(sum(on_cuda(matrix).t(), {0}), sum(matrix.t(), {0}));
  check_matches(sum(on_cuda(matrix).t(), {1}), sum(matrix.t(), {1}));
}

TEST_CASE("cuda large reductions split across blocks agree with the CPU", "[cuda]") {
  SECTION("4096 x 512 column sums (a bias gradient) and row sums") {
    Tensor grad = normal({4096, 512}, DType::Float32, 21);
    Tensor grad_gpu = on_cuda(grad);
    check_matches(sum(grad_gpu, {0}), sum(grad, {0}));
    check_matches(sum(grad_gpu, {1}), sum(grad, {1}));
    check_matches(amax(grad_gpu, {0}), amax(grad, {0}));
    Tensor grad64 = normal({4096, 512}, DType::Float64, 22);
    check_matches(sum(on_cuda(grad64), {0}), sum(grad64, {0}));
  }
  SECTION("a 2^22-element full sum, mean and max") {
    // Uniform [0, 1) values: the sum (~2^21) has no cancellation, so 1e-5 relative is a
    // real bound on the float32 accumulation error.
    Tensor x = uniform({int64_t{1} << 22}, DType::Float32, 23);
    Tensor x_gpu = on_cuda(x);
    check_matches(sum(x_gpu), sum(x));
    check_matches(mean(x_gpu), mean(x));
    check_matches(max(x_gpu), max(x));
    Tensor y = normal({1 << 11, 1 << 11}, DType::Float64, 24);
    check_matches(sum(on_cuda(y)), sum(y));
    check_matches(mean(on_cuda(y)), mean(y));
  }
  SECTION("odd lengths") {
    for (int64_t length : {1, 7, 1000, 4097, 100003}) {
      INFO("length " << length);
      Tensor x = uniform({length}, DType::Float32, 25 + length);
      check_matches(sum(on_cuda(x)), sum(x));
      check_matches(max(on_cuda(x)), max(x));
      Tensor rows = normal({3, length}, DType::Float64, 26 + length);
      check_matches(sum(on_cuda(rows), {1}), sum(rows, {1}));
      check_matches(sum(on_cuda(rows), {0}), sum(rows, {0}));
    }
  }
}

TEST_CASE("cuda sums of integers and bools widen to int64 and max keeps the dtype", "[cuda]") {
  for (DType dtype : {DType::Int64, DType::Int32}) {
    Generator generator(31);
    Tensor x = randint(-1000, 1000, {37, 41, 5}, {.dtype = dtype}, &generator);
    Tensor x_gpu = on_cuda(x);
    for (const auto& dims : kDimSets) {
      INFO(dtype << " dims " << dims.size());
      Tensor total = sum(x_gpu, dims);
      CHECK(total.dtype() == DType::Int64);
      check_matches(total, sum(x, dims));
      check_matches(amax(x_gpu, dims), amax(x, dims));
    }
  }
  Tensor positive = gt(normal({129, 65}, DType::Float32, 32), 0.0);  // bool
  Tensor positive_gpu = on_cuda(positive);
  for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}}) {
    check_matches(sum(positive_gpu, dims), sum(positive, dims));
    check_matches(amax(positive_gpu, dims), amax(positive, dims));
  }
}

TEST_CASE("cuda reductions of float16 and bfloat16 accumulate in float", "[cuda]") {
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    Tensor x = converted_copy(normal({64, 300}, DType::Float32, 33), dtype, Device::cpu());
    Tensor x_gpu = on_cuda(x);
    for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}}) {
      INFO(dtype << " dims " << dims.size());
      check_matches(sum(x_gpu, dims), sum(x, dims));
      check_matches(amax(x_gpu, dims), amax(x, dims), 0.0);  // a max is exact
    }
  }
}

TEST_CASE("cuda max and min propagate NaN and min through the kernel table", "[cuda]") {
  std::vector<float> values(3 * 2000);
  Tensor random = normal({3 * 2000}, DType::Float32, 41);
  std::vector<double> random_values = host_values(random);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(random_values[i]);
  values[1500] = std::numeric_limits<float>::quiet_NaN();       // row 0, long rows (block path)
  values[2000 + 7] = std::numeric_limits<float>::quiet_NaN();   // row 1
  Tensor x = from_vector(values, {3, 2000});
  Tensor x_gpu = on_cuda(x);
  check_matches(amax(x_gpu, {1}), amax(x, {1}));  // NaN, NaN, a number
  check_matches(amax(x_gpu, {0}), amax(x, {0}));
  check_matches(max(x_gpu), max(x));              // NaN
  CHECK(std::isnan(max(x_gpu).item<float>()));

  const KernelTable& gpu = kernels(Device::cuda());
  const KernelTable& cpu = kernels(Device::cpu());
  for (const Shape& keepdim_sizes : {Shape{3, 1}, Shape{1, 2000}, Shape{1, 1}}) {
    Tensor expected = empty(keepdim_sizes);
    Tensor got = empty(keepdim_sizes, {.device = Device::cuda()});
    cpu.reduce(ReduceOp::Min, x, expected);
    gpu.reduce(ReduceOp::Min, x_gpu, got);
    check_matches(got, expected);
  }
  Tensor y = normal({17, 1031}, DType::Float64, 42);
  Tensor expected = empty({17, 1}, {.dtype = DType::Float64});
  Tensor got = empty({17, 1}, {.dtype = DType::Float64, .device = Device::cuda()});
  cpu.reduce(ReduceOp::Min, y, expected);
  gpu.reduce(ReduceOp::Min, on_cuda(y), got);
  check_matches(got, expected);
}

TEST_CASE("cuda argmax and max(dim) match the CPU: first of ties, first NaN", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    for (const Shape& sizes : {Shape{6, 7, 1030}, Shape{33, 1, 9}, Shape{2, 3000, 3}}) {
      Tensor x = small_integers(sizes, dtype, 51 + sizes[1]);  // many ties
      Tensor x_gpu = on_cuda(x);
      for (int64_t dim = 0; dim < 3; ++dim) {
        INFO(dtype << " sizes " << sizes << " dim " << dim);
        check_matches(argmax(x_gpu, dim), argmax(x, dim));
        auto [values_gpu, indices_gpu] = max(x_gpu, dim, /*keepdim=*/true);
        auto [values, indices] = max(x, dim, /*keepdim=*/true);
        check_matches(values_gpu, values);
        check_matches(indices_gpu, indices);
      }
    }
  }
  // NaN counts as the maximum, and the first NaN wins; -inf loses to everything.
  std::vector<float> values(2 * 1500, 1.0f);
  values[10] = 5.0f, values[700] = std::numeric_limits<float>::quiet_NaN(), values[900] = 5.0f;
  values[1400] = std::numeric_limits<float>::quiet_NaN();
  for (int i = 1500; i < 3000; ++i) values[i] = -std::numeric_limits<float>::infinity();
  values[2999] = 2.0f;
  Tensor x = from_vector(values, {2, 1500});
  check_matches(argmax(on_cuda(x), 1), argmax(x, 1));
  CHECK(host_values(argmax(on_cuda(x), 1)) == std::vector<double>{700.0, 1499.0});
  Tensor short_rows = from_vector(std::vector<float>{3, 1, 3, NAN, 2, NAN, -INFINITY, -INFINITY}, {2, 4});
  CHECK(host_values(argmax(on_cuda(short_rows), 1)) == std::vector<double>{3.0, 1.0});
  CHECK(host_values(argmax(on_cuda(short_rows), 0)) == host_values(argmax(short_rows, 0)));
}

TEST_CASE("cuda softmax and log_softmax along every dim, forward and backward", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& sizes : {Shape{6, 7, 1030}, Shape{33, 1, 9}, Shape{2, 2000, 3}, Shape{64, 10, 1}}) {
      Tensor x = normal(sizes, dtype, 61 + sizes[0]);
      Tensor upstream = normal(sizes, dtype, 62 + sizes[0]);
      Tensor upstream_gpu = on_cuda(upstream);
      for (int64_t dim = 0; dim < 3; ++dim) {
        for (bool log : {false, true}) {
          INFO(dtype << " sizes " << sizes << " dim " << dim << (log ? " log_softmax" : " softmax"));
          Tensor x_cpu = x.detach().requires_grad_();
          Tensor x_gpu = on_cuda(x).requires_grad_();
          Tensor y_cpu = log ? log_softmax(x_cpu, dim) : softmax(x_cpu, dim);
          Tensor y_gpu = log ? log_softmax(x_gpu, dim) : softmax(x_gpu, dim);
          check_matches(y_gpu, y_cpu);
          sum(mul(y_cpu, upstream)).backward();
          sum(mul(y_gpu, upstream_gpu)).backward();
          check_matches(x_gpu.grad(), x_cpu.grad());
        }
      }
    }
  }
}

TEST_CASE("cuda softmax of infinite lines gives the CPU's NaN and zeros", "[cuda]") {
  // Row 0 all -inf (NaN, as in PyTorch); row 1 some -inf (zeros there); row 2 holds +inf.
  Tensor x = from_vector(std::vector<float>{-INFINITY, -INFINITY, -INFINITY, -INFINITY,  //
                                            -INFINITY, 0.0f, 1.0f, -INFINITY,           //
                                            INFINITY, 1.0f, 2.0f, 3.0f},
                         {3, 4});
  for (int64_t dim : {0, 1}) {
    check_matches(softmax(on_cuda(x), dim), softmax(x, dim));
    check_matches(log_softmax(on_cuda(x), dim), log_softmax(x, dim));
  }
}

TEST_CASE("cuda softmax of float16 and bfloat16 computes in float", "[cuda]") {
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    Tensor x = converted_copy(normal({16, 1500}, DType::Float32, 71), dtype, Device::cpu());
    for (int64_t dim : {0, 1}) {
      INFO(dtype << " dim " << dim);
      check_matches(softmax(on_cuda(x), dim), softmax(x, dim));
      check_matches(log_softmax(on_cuda(x), dim), log_softmax(x, dim));
    }
  }
}

TEST_CASE("cuda cross_entropy with ignore_index and label smoothing, and its gradient", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& sizes : {Shape{37, 11}, Shape{8, 5000}, Shape{1, 1}}) {
      int64_t batch = sizes[0], classes = sizes[1];
      Generator generator(81 + classes);
      Tensor target = randint(0, classes, {batch}, {.dtype = DType::Int64}, &generator);
      std::vector<double> labels = host_values(target);
      Tensor logits = normal(sizes, dtype, 82 + classes);
      for (int64_t ignore_index : {int64_t{-100}, int64_t{0}}) {
        // Every fifth sample (from the fourth) ignored; with ignore_index 0, class 0 too.
        std::vector<int64_t> with_ignored;
        for (int64_t n = 0; n < batch; ++n) {
          with_ignored.push_back(n % 5 == 3 ? ignore_index : static_cast<int64_t>(labels[n]));
        }
        Tensor target_cpu = from_vector(with_ignored);
        Tensor target_gpu = on_cuda(target_cpu);
        for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
          for (double smoothing : {0.0, 0.1}) {
            INFO(dtype << " sizes " << sizes << " reduction " << static_cast<int>(reduction) << " smoothing "
                       << smoothing << " ignore_index " << ignore_index);
            CrossEntropyOptions options{.reduction = reduction, .label_smoothing = smoothing,
                                        .ignore_index = ignore_index};
            Tensor logits_cpu = logits.detach().requires_grad_();
            Tensor logits_gpu = on_cuda(logits).requires_grad_();
            Tensor loss_cpu = cross_entropy(logits_cpu, target_cpu, options);
            Tensor loss_gpu = cross_entropy(logits_gpu, target_gpu, options);
            check_matches(loss_gpu, loss_cpu);
            sum(loss_cpu).backward();
            sum(loss_gpu).backward();
            check_matches(logits_gpu.grad(), logits_cpu.grad());
          }
        }
      }
    }
  }
}

TEST_CASE("cuda nll_loss per sample and an out-of-range target gives NaN, not garbage", "[cuda]") {
  Tensor log_probs = log_softmax(normal({6, 5}, DType::Float32, 91), 1);
  Tensor target = from_vector(std::vector<int64_t>{0, 4, -100, 2, 1, 3});
  Tensor loss_gpu = nll_loss(on_cuda(log_probs), on_cuda(target), Reduction::None);
  check_matches(loss_gpu, nll_loss(log_probs, target, Reduction::None));
  CHECK(host_values(loss_gpu)[2] == 0.0);

  // The CPU throws for target 5 with 5 classes; the GPU does not synchronise to check, and
  // marks the sample's loss NaN instead (so the mean is NaN too).
  Tensor bad_target = from_vector(std::vector<int64_t>{0, 5, -100, 2, -7, 3});
  CHECK_THROWS(nll_loss(log_probs, bad_target, Reduction::None));
  std::vector<double> bad = host_values(nll_loss(on_cuda(log_probs), on_cuda(bad_target), Reduction::None));
  std::vector<double> good = host_values(loss_gpu);
  CHECK(std::isnan(bad[1]));
  CHECK(std::isnan(bad[4]));
  CHECK(bad[0] == good[0]);
  CHECK(bad[3] == good[3]);
  CHECK(std::isnan(nll_loss(on_cuda(log_probs), on_cuda(bad_target)).item<double>()));
}

TEST_CASE("cuda fused cross_entropy kernels match the CPU's for every dtype, row length and smoothing", "[cuda]") {
  // Row lengths for a warp per row (1, 11, 1000) and a block per row (5000); every fifth
  // sample ignored; smoothing 1 leaves only the uniform term.
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    DType lse_dtype = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
    for (const Shape& sizes : {Shape{1, 1}, Shape{37, 11}, Shape{300, 1000}, Shape{9, 5000}}) {
      int64_t batch = sizes[0], classes = sizes[1];
      Generator generator(101 + classes);
      std::vector<int64_t> labels = randint(0, classes, {batch}, {.dtype = DType::Int64}, &generator)
                                        .to_vector<int64_t>();
      for (int64_t n = 3; n < batch; n += 5) labels[n] = -100;
      Tensor target = from_vector(labels);
      // Logits of spread 3: softmax far from uniform, so the gradient is not near 0.
      Tensor logits = converted_copy(mul(normal(sizes, DType::Float32, 102 + classes), 3.0), dtype, Device::cpu());
      Tensor grad_loss = converted_copy(normal({batch}, DType::Float32, 103 + classes), dtype, Device::cpu());
      for (double smoothing : {0.0, 0.1, 1.0}) {
        INFO(dtype << " sizes " << sizes << " smoothing " << smoothing);
        Tensor loss_cpu = empty({batch}, {.dtype = dtype}), lse_cpu = empty({batch}, {.dtype = lse_dtype});
        Tensor loss_gpu = empty({batch}, {.dtype = dtype, .device = Device::cuda()});
        Tensor lse_gpu = empty({batch}, {.dtype = lse_dtype, .device = Device::cuda()});
        kernels(Device::cpu()).cross_entropy_forward(logits, target, -100, smoothing, loss_cpu, lse_cpu);
        kernels(Device::cuda())
            .cross_entropy_forward(on_cuda(logits), on_cuda(target), -100, smoothing, loss_gpu, lse_gpu);
        check_matches(loss_gpu, loss_cpu);
        check_matches(lse_gpu, lse_cpu, tolerance(lse_dtype));
        for (int64_t n = 3; n < batch; n += 5) CHECK(host_values(loss_gpu)[n] == 0.0);

        Tensor grad_cpu = empty(sizes, {.dtype = dtype});
        Tensor grad_gpu = empty(sizes, {.dtype = dtype, .device = Device::cuda()});
        kernels(Device::cpu()).cross_entropy_backward(grad_loss, logits, lse_cpu, target, -100, smoothing, grad_cpu);
        kernels(Device::cuda())
            .cross_entropy_backward(on_cuda(grad_loss), on_cuda(logits), lse_gpu, on_cuda(target), -100, smoothing,
                                    grad_gpu);
        check_matches(grad_gpu, grad_cpu);
      }
    }
  }
}

TEST_CASE("cuda cross_entropy of 16-bit logits with float32 losses (autocast) matches the CPU: long rows, "
          "16-byte and unaligned rows, infinite and NaN logits", "[cuda]") {
  // 50304 classes: GPT-2's padded vocabulary, read 8 elements at a time; 1001 (odd) and an
  // offset of one element take the one-element path.
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    for (const Shape& sizes : {Shape{12, 50304}, Shape{40, 1001}, Shape{16, 64}}) {
      for (int64_t offset : {0, 1}) {
        const int64_t batch = sizes[0], classes = sizes[1];
        Generator generator(141 + classes);
        std::vector<int64_t> labels =
            randint(0, classes, {batch}, {.dtype = DType::Int64}, &generator).to_vector<int64_t>();
        labels[2] = -100;
        Tensor target = from_vector(labels);
        std::vector<float> values = mul(normal({batch * classes + offset}, DType::Float32, 142), 4.0).to_vector<float>();
        values[offset + 3 * classes + 5] = static_cast<float>(kInf);     // row 3: +inf, shift 0
        for (int64_t c = 0; c < classes; ++c) values[offset + 4 * classes + c] = static_cast<float>(-kInf);  // row 4
        values[offset + 5 * classes + 1] = static_cast<float>(kNaN);     // row 5: NaN
        Tensor storage = converted_copy(from_vector(values), dtype, Device::cpu());
        Tensor logits = make_view(storage, sizes, {classes, 1}, offset);
        Tensor logits_gpu = make_view(on_cuda(storage), sizes, {classes, 1}, offset);
        Tensor grad_loss = normal({batch}, DType::Float32, 143);
        for (double smoothing : {0.0, 0.1}) {
          INFO(dtype << " sizes " << sizes << " offset " << offset << " smoothing " << smoothing);
          Tensor loss_cpu = empty({batch}), lse_cpu = empty({batch});
          Tensor loss_gpu = empty({batch}, {.device = Device::cuda()}), lse_gpu = empty({batch}, {.device = Device::cuda()});
          kernels(Device::cpu()).cross_entropy_forward(logits, target, -100, smoothing, loss_cpu, lse_cpu);
          kernels(Device::cuda())
              .cross_entropy_forward(logits_gpu, on_cuda(target), -100, smoothing, loss_gpu, lse_gpu);
          // float32 sums of 50304 terms in another order: relative 1e-5.
          check_matches(loss_gpu, loss_cpu, 1e-5);
          check_matches(lse_gpu, lse_cpu, 1e-5);

          Tensor grad_cpu = empty(sizes, {.dtype = dtype});
          Tensor grad_gpu = empty(sizes, {.dtype = dtype, .device = Device::cuda()});
          kernels(Device::cpu()).cross_entropy_backward(grad_loss, logits, lse_cpu, target, -100, smoothing, grad_cpu);
          kernels(Device::cuda())
              .cross_entropy_backward(on_cuda(grad_loss), logits_gpu, lse_gpu, on_cuda(target), -100, smoothing,
                                      grad_gpu);
          check_matches(grad_gpu, grad_cpu);
        }
      }
    }
  }
}

TEST_CASE("cuda cross_entropy of float16, bfloat16 and transposed logits matches the CPU", "[cuda]") {
  Tensor target = from_vector(std::vector<int64_t>{3, 0, -100, 6, 6, 1, 2, 5});
  for (DType dtype : {DType::Float16, DType::BFloat16, DType::Float32}) {
    // (8, 7) logits as the transpose of a (7, 8) tensor: not contiguous.
    Tensor stored = converted_copy(normal({7, 8}, DType::Float32, 111), dtype, Device::cpu());
    for (double smoothing : {0.0, 0.2}) {
      INFO(dtype << " smoothing " << smoothing);
      Tensor stored_cpu = stored.detach().requires_grad_();
      Tensor stored_gpu = on_cuda(stored).requires_grad_();
      Tensor loss_cpu = cross_entropy(transpose(stored_cpu, 0, 1), target, {.label_smoothing = smoothing});
      Tensor loss_gpu = cross_entropy(transpose(stored_gpu, 0, 1), on_cuda(target), {.label_smoothing = smoothing});
      check_matches(loss_gpu, loss_cpu);
      loss_cpu.backward();
      loss_gpu.backward();
      check_matches(stored_gpu.grad(), stored_cpu.grad());
    }
  }
}

TEST_CASE("cuda cross_entropy: an out-of-range target gives a NaN loss, not garbage", "[cuda]") {
  Tensor logits = normal({6, 5}, DType::Float32, 121);
  Tensor bad_target = from_vector(std::vector<int64_t>{0, 5, -100, 2, -7, 3});
  CHECK_THROWS_WITH(cross_entropy(logits, bad_target), Catch::Contains("out of range"));
  std::vector<double> losses =
      host_values(cross_entropy(on_cuda(logits), on_cuda(bad_target), {.reduction = Reduction::None}));
  CHECK(std::isfinite(losses[0]));
  CHECK(std::isnan(losses[1]));
  CHECK(losses[2] == 0.0);
  CHECK(std::isnan(losses[4]));
  CHECK(std::isnan(cross_entropy(on_cuda(logits), on_cuda(bad_target)).item<double>()));
}

TEST_CASE("cuda cross_entropy saves the logits and one float per row, no log_softmax copy", "[cuda]") {
  const int64_t batch = 64, classes = 1000;
  Tensor logits = on_cuda(normal({batch, classes}, DType::Float32, 131)).requires_grad_();
  Generator generator(132);
  Tensor target = on_cuda(randint(0, classes, {batch}, {.dtype = DType::Int64}, &generator));
  auto bytes = [](MemoryCategory category) { return memory::snapshot(Device::cuda()).category(category).current; };
  int64_t activation_before = bytes(MemoryCategory::Activation);
  int64_t temporary_before = bytes(MemoryCategory::Temporary);
  Tensor loss = cross_entropy(logits, target);
  // Saved: the logits and targets (re-tagged), the log-sum-exp and the count of the mean.
  CHECK(bytes(MemoryCategory::Activation) - activation_before ==
        batch * classes * 4 + batch * 8 + batch * 4 + 4);
  // Left over besides what was re-tagged: only the 0-d loss.
  CHECK(bytes(MemoryCategory::Temporary) - temporary_before == 4 - batch * classes * 4 - batch * 8);
  loss.backward();
  CHECK(bytes(MemoryCategory::Activation) == activation_before);
  CHECK(logits.grad().sizes() == Shape{batch, classes});
}
