// tests/cuda/test_cuda_layer_norm.cpp — the CUDA layer_norm kernels against the CPU ones
// on fresh random inputs: the output and the saved statistics, grad_input, grad_weight and
// grad_bias, for rows a warp covers (7 x 33), a block covers (64 x 768, 3 x 4100) and
// rows too long for the shared-memory cache (5 x 8192 backward, 2 x 20000 both ways), in
// float32, float64, float16 and bfloat16 (with 16-bit or float32 parameters), with and
// without weight and bias, at a misaligned offset, and under autocast; add_layer_norm (the
// residual add fused in) against the CPU: the sum, the output and every gradient, with a
// residual of the input's dtype and a bfloat16 one beside a float32 stream, cached and
// uncached rows, and a misaligned residual.
#include <catch2/catch.hpp>

#include <string>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/layer_norm.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/factory.h"
#include "cuda/kernel_checks.h"

using namespace mg;

namespace {

using cuda_checks::check_within_scale;
using cuda_checks::kCuda;
using cuda_checks::random_normal;

// A few units in the last place of the input's dtype.
double tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-5;
    case DType::Float16: return 4e-3;
    default: return 3e-2;
  }
}

struct Case {
  Shape sizes;
  int normalised_dims;
  DType dtype;
  DType parameter_dtype;
};

Shape trailing(const Shape& sizes, int dims) {
  Shape result;
  for (int d = sizes.size() - dims; d < sizes.size(); ++d) result.push_back(sizes[d]);
  return result;
}

}  // namespace

TEST_CASE("CUDA layer_norm matches the CPU (output, statistics, every gradient)", "[cuda]") {
  auto [sizes, dims, dtype, parameter_dtype] = GENERATE(
      Case{{7, 33}, 1, DType::Float32, DType::Float32}, Case{{64, 768}, 1, DType::Float32, DType::Float32},
      Case{{3, 4100}, 1, DType::Float32, DType::Float32}, Case{{5, 8192}, 1, DType::Float32, DType::Float32},
      Case{{2, 20000}, 1, DType::Float32, DType::Float32}, Case{{4, 16, 48}, 2, DType::Float32, DType::Float32},
      Case{{7, 33}, 1, DType::Float64, DType::Float64}, Case{{64, 768}, 1, DType::Float64, DType::Float64},
      Case{{7, 33}, 1, DType::Float16, DType::Float16}, Case{{64, 768}, 1, DType::Float16, DType::Float16},
      Case{{3, 4100}, 1, DType::Float16, DType::Float32}, Case{{2, 3, 1024}, 1, DType::Float16, DType::Float32},
      Case{{7, 33}, 1, DType::BFloat16, DType::BFloat16}, Case{{64, 768}, 1, DType::BFloat16, DType::Float32},
      Case{{3, 4100}, 1, DType::BFloat16, DType::BFloat16}, Case{{5, 8192}, 1, DType::BFloat16, DType::Float32});
  const bool affine = GENERATE(true, false);
  Shape normalized = trailing(sizes, dims);
  INFO("input " << sizes << " " << dtype << ", normalized_shape " << normalized << ", parameters " << parameter_dtype
                << (affine ? "" : " (none)"));
  const double relative = tolerance(dtype);
  // An offset above the spread: the variance must not cancel.
  Tensor x = random_normal(sizes, dtype, 1, 2.0, 3.0).requires_grad_();
  Tensor weight, bias, cuda_weight, cuda_bias;
  if (affine) {
    weight = random_normal(normalized, parameter_dtype, 2).requires_grad_();
    bias = random_normal(normalized, parameter_dtype, 3).requires_grad_();
    cuda_weight = weight.detach().to(kCuda).requires_grad_();
    cuda_bias = bias.detach().to(kCuda).requires_grad_();
  }
  Tensor cuda_x = x.detach().to(kCuda).requires_grad_();
  Tensor cpu_out = layer_norm(x, normalized, weight, bias);
  Tensor cuda_out = layer_norm(cuda_x, normalized, cuda_weight, cuda_bias);
  check_within_scale(cuda_out, cpu_out, relative, "output");

  Tensor grad_output = random_normal(sizes, dtype, 4);
  sum(mul(cpu_out, grad_output)).backward();
  sum(mul(cuda_out, grad_output.to(kCuda))).backward();
  check_within_scale(cuda_x.grad(), x.grad(), relative, "grad_input");
  if (affine) {
    // Sums over the rows: 16-bit parameters are rounded once from float sums on both sides.
    const double parameter_relative = parameter_dtype == DType::Float32 ? 1e-4 : relative;
    check_within_scale(cuda_weight.grad(), weight.grad(), parameter_relative, "grad_weight");
    check_within_scale(cuda_bias.grad(), bias.grad(), parameter_relative, "grad_bias");
  }
}

TEST_CASE("CUDA layer_norm kernels write the CPU's statistics, and only grad_weight when asked", "[cuda]") {
  const int64_t rows = 37, cols = 300;
  for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16}) {
    INFO(dtype);
    const DType stats = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
    Tensor input = random_normal({rows, cols}, dtype, 10, 1.5, -2.0);
    Tensor weight = random_normal({cols}, dtype, 11), bias = random_normal({cols}, dtype, 12);
    Tensor output = empty({rows, cols}, {.dtype = dtype});
    Tensor mean = empty({rows}, {.dtype = stats}), invstd = empty({rows}, {.dtype = stats});
    Tensor cuda_output = empty({rows, cols}, {.dtype = dtype, .device = kCuda});
    Tensor cuda_mean = empty({rows}, {.dtype = stats, .device = kCuda});
    Tensor cuda_invstd = empty({rows}, {.dtype = stats, .device = kCuda});
    cuda_checks::cpu_kernels().layer_norm(input, Tensor(), weight, bias, 1e-5, Tensor(), output, mean, invstd);
    cuda_checks::gpu_kernels().layer_norm(input.to(kCuda), Tensor(), weight.to(kCuda), bias.to(kCuda), 1e-5, Tensor(),
                                          cuda_output, cuda_mean, cuda_invstd);
    const double relative = dtype == DType::Float64 ? 1e-12 : 1e-5;
    check_within_scale(cuda_mean, mean, relative, "save_mean");
    check_within_scale(cuda_invstd, invstd, relative, "save_invstd");
    check_within_scale(cuda_output, output, tolerance(dtype), "output");

    // Only grad_weight: grad_input and grad_bias undefined.
    Tensor grad = random_normal({rows, cols}, dtype, 13);
    Tensor grad_weight = empty({cols}, {.dtype = dtype});
    Tensor cuda_grad_weight = empty({cols}, {.dtype = dtype, .device = kCuda});
    cuda_checks::cpu_kernels().layer_norm_backward(grad, input, weight, mean, invstd, Tensor(), Tensor(), grad_weight,
                                                   Tensor());
    cuda_checks::gpu_kernels().layer_norm_backward(grad.to(kCuda), input.to(kCuda), weight.to(kCuda), cuda_mean,
                                                   cuda_invstd, Tensor(), Tensor(), cuda_grad_weight, Tensor());
    check_within_scale(cuda_grad_weight, grad_weight, dtype == DType::Float32 ? 1e-4 : tolerance(dtype), "grad_weight alone");
  }
}

TEST_CASE("CUDA layer_norm of a misaligned view takes the scalar path", "[cuda]") {
  // Rows of 64 values one element into their buffer: no 16-byte vector is aligned.
  Tensor base = random_normal({1 + 9 * 64}, DType::Float16, 20);
  Tensor x = make_view(base, {9, 64}, {64, 1}, 1);
  Tensor cuda_base = base.to(kCuda);
  Tensor cuda_x = make_view(cuda_base, {9, 64}, {64, 1}, 1);
  Tensor weight = random_normal({64}, DType::Float32, 21);
  check_within_scale(layer_norm(cuda_x, {64}, weight.to(kCuda)), layer_norm(x, {64}, weight), 4e-3, "output");
}

TEST_CASE("CUDA layer_norm under autocast runs in float32", "[cuda]") {
  Tensor x = random_normal({16, 768}, DType::Float32, 30).to(kCuda);
  Tensor weight = random_normal({768}, DType::Float32, 31).to(kCuda).requires_grad_();
  Tensor bias = random_normal({768}, DType::Float32, 32).to(kCuda).requires_grad_();
  Tensor half = x.to(DType::Float16).requires_grad_();
  Tensor out;
  {
    amp::AutocastGuard autocast(DType::Float16, DeviceType::CUDA);
    out = layer_norm(half, {768}, weight, bias);
  }
  CHECK(out.dtype() == DType::Float32);
  Tensor expected = layer_norm(half.detach().to(DType::Float32), {768}, weight.detach(), bias.detach());
  check_within_scale(out, expected, 1e-6, "output");
  sum(out).backward();
  CHECK(half.grad().dtype() == DType::Float16);
  CHECK(weight.grad().dtype() == DType::Float32);
}

TEST_CASE("CUDA add_layer_norm matches the CPU (sum, output, every gradient)", "[cuda]") {
  struct FusedCase {
    Shape sizes;
    DType dtype, residual_dtype;
  };
  auto [sizes, dtype, residual_dtype] =
      GENERATE(FusedCase{{7, 33}, DType::Float32, DType::Float32}, FusedCase{{64, 768}, DType::Float32, DType::Float32},
               FusedCase{{64, 768}, DType::Float32, DType::BFloat16}, FusedCase{{3, 4100}, DType::Float32, DType::Float16},
               FusedCase{{2, 20000}, DType::Float32, DType::BFloat16}, FusedCase{{7, 33}, DType::Float64, DType::Float64},
               FusedCase{{64, 768}, DType::BFloat16, DType::BFloat16}, FusedCase{{5, 8192}, DType::Float16, DType::Float16});
  const Shape normalized{sizes[1]};
  INFO("stream " << sizes << " " << dtype << ", residual " << residual_dtype);
  Tensor x = random_normal(sizes, dtype, 30, 2.0, 3.0).requires_grad_();
  Tensor residual = random_normal(sizes, residual_dtype, 31).requires_grad_();
  const DType parameter_dtype = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor weight = random_normal(normalized, parameter_dtype, 32).requires_grad_();
  Tensor bias = random_normal(normalized, parameter_dtype, 33).requires_grad_();
  Tensor cuda_x = x.detach().to(kCuda).requires_grad_(), cuda_residual = residual.detach().to(kCuda).requires_grad_();
  Tensor cuda_weight = weight.detach().to(kCuda).requires_grad_(), cuda_bias = bias.detach().to(kCuda).requires_grad_();
  const SumAndNorm cpu = add_layer_norm(x, residual, normalized, weight, bias);
  const SumAndNorm gpu = add_layer_norm(cuda_x, cuda_residual, normalized, cuda_weight, cuda_bias);
  REQUIRE(std::string(gpu.sum.grad_fn()->name()) == "AddLayerNormBackward");
  const double relative = tolerance(dtype);
  check_within_scale(gpu.sum, cpu.sum, relative, "sum");
  check_within_scale(gpu.output, cpu.output, relative, "output");

  Tensor sum_weights = random_normal(sizes, dtype, 34), norm_weights = random_normal(sizes, dtype, 35);
  (sum(mul(cpu.sum, sum_weights)) + sum(mul(cpu.output, norm_weights))).backward();
  (sum(mul(gpu.sum, sum_weights.to(kCuda))) + sum(mul(gpu.output, norm_weights.to(kCuda)))).backward();
  check_within_scale(cuda_x.grad(), x.grad(), relative, "grad x");
  check_within_scale(cuda_residual.grad(), residual.grad(), tolerance(residual_dtype), "grad residual");
  const double parameter_relative = parameter_dtype == DType::Float32 ? 1e-4 : relative;
  check_within_scale(cuda_weight.grad(), weight.grad(), parameter_relative, "grad_weight");
  check_within_scale(cuda_bias.grad(), bias.grad(), parameter_relative, "grad_bias");
}

TEST_CASE("CUDA add_layer_norm of a misaligned residual takes the scalar path", "[cuda]") {
  Tensor base = random_normal({1 + 9 * 64}, DType::BFloat16, 36);
  Tensor residual = make_view(base, {9, 64}, {64, 1}, 1);
  Tensor cuda_base = base.to(kCuda);
  Tensor cuda_residual = make_view(cuda_base, {9, 64}, {64, 1}, 1);
  Tensor x = random_normal({9, 64}, DType::Float32, 37);
  const SumAndNorm cpu = add_layer_norm(x, residual, {64});
  const SumAndNorm gpu = add_layer_norm(x.to(kCuda), cuda_residual, {64});
  check_within_scale(gpu.sum, cpu.sum, 1e-6, "sum");
  check_within_scale(gpu.output, cpu.output, 1e-5, "output");
}
