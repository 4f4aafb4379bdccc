// tests/cuda/test_cuda_mlp.cpp — mg::mlp and its kernels on CUDA against the CPU on fresh
// random inputs: the output and all five gradients of the op, and linear_gelu_forward's two
// outputs and linear_gelu_backward's two, in float32, bfloat16 and float16 (float64 on the
// unfused path), tanh and erf, with and without biases, for a hidden size that is a
// multiple of 8 (cuBLASLt's GELU_AUX_BIAS epilogue forward for the tanh form), one
// that is not (the unfused kernels) and GPT-2 124M's (768 -> 3072 -> 768).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/mlp.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/factory.h"
#include "cuda/kernel_checks.h"

using namespace mg;

namespace {

using cuda_checks::check_within_scale;
using cuda_checks::kCuda;
using cuda_checks::random_normal;

// Relative to the largest CPU value: the epilogues compute gelu from the product before it
// is rounded to a 16-bit dtype, the CPU from the rounded product, so 16-bit results may
// differ by an ulp or two of the largest value; float32 sums differ in order only.
double tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-4;
    case DType::Float16: return 8e-3;
    default: return 4e-2;
  }
}

struct Case {
  Shape input_sizes;  // (..., in)
  int64_t hidden;
  DType dtype;
};

// Normal values scaled by 1/sqrt(fan_in), so every product stays of order 1.
Tensor scaled_normal(const Shape& sizes, DType dtype, uint64_t seed, int64_t fan_in) {
  return random_normal(sizes, dtype, seed, 1.0 / std::sqrt(static_cast<double>(fan_in)));
}

const char* form_name(GeluApproximate form) { return form == GeluApproximate::Tanh ? "tanh" : "erf"; }

}  // namespace

TEST_CASE("CUDA mlp matches the CPU op: the output and all five gradients", "[cuda][mlp]") {
  auto [input_sizes, hidden, dtype] = GENERATE(
      Case{{2, 5, 24}, 96, DType::Float32}, Case{{2, 5, 24}, 96, DType::BFloat16}, Case{{2, 5, 24}, 96, DType::Float16},
      Case{{3, 7, 20}, 36, DType::Float32}, Case{{3, 7, 20}, 36, DType::BFloat16}, Case{{3, 7, 20}, 36, DType::Float16},
      Case{{13, 40}, 64, DType::Float64}, Case{{2, 32, 768}, 3072, DType::BFloat16},
      Case{{2, 32, 768}, 3072, DType::Float16}, Case{{1, 64, 768}, 3072, DType::Float32});
  const GeluApproximate form = GENERATE(GeluApproximate::Tanh, GeluApproximate::None);
  const bool with_biases = GENERATE(true, false);
  const int64_t in = input_sizes.back(), out = in;
  INFO("input " << input_sizes << ", hidden " << hidden << ", " << dtype << ", " << form_name(form)
                << (with_biases ? ", biases" : ", no biases"));
  std::vector<Tensor> cpu{random_normal(input_sizes, dtype, 1), scaled_normal({hidden, in}, dtype, 2, in),
                          with_biases ? random_normal({hidden}, dtype, 3, 0.1) : Tensor(),
                          scaled_normal({out, hidden}, dtype, 4, hidden),
                          with_biases ? random_normal({out}, dtype, 5, 0.1) : Tensor()};
  std::vector<Tensor> gpu;
  for (Tensor& tensor : cpu) {
    gpu.push_back(tensor.defined() ? tensor.to(kCuda).requires_grad_() : Tensor());
    if (tensor.defined()) tensor.requires_grad_();
  }
  Tensor cpu_out = mlp(cpu[0], cpu[1], cpu[2], cpu[3], cpu[4], form);
  Tensor gpu_out = mlp(gpu[0], gpu[1], gpu[2], gpu[3], gpu[4], form);
  const double relative = tolerance(dtype);
  check_within_scale(gpu_out, cpu_out, relative, "output");

  Tensor grad_output = random_normal(cpu_out.sizes(), dtype, 6);
  sum(mul(cpu_out, grad_output)).backward();
  sum(mul(gpu_out, grad_output.to(kCuda))).backward();
  const char* names[] = {"grad x", "grad c_fc.weight", "grad c_fc.bias", "grad c_proj.weight", "grad c_proj.bias"};
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (cpu[i].defined()) check_within_scale(gpu[i].grad(), cpu[i].grad(), relative, names[i]);
  }
}

TEST_CASE("CUDA linear_gelu kernels write the CPU's pre-activation, gelu and gradients", "[cuda][mlp]") {
  const int64_t rows = 37, in = 40, hidden = 64, out = 24;
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    for (bool tanh : {true, false}) {
      for (bool with_bias : {true, false}) {
        INFO(dtype << (tanh ? " tanh" : " erf") << (with_bias ? " bias" : " no bias"));
        const double relative = tolerance(dtype);
        Tensor input = random_normal({rows, in}, dtype, 10);
        Tensor weight = scaled_normal({hidden, in}, dtype, 11, in);
        Tensor bias = with_bias ? random_normal({hidden}, dtype, 12, 0.1) : Tensor();
        Tensor pre = empty({rows, hidden}, {.dtype = dtype}), activation = empty({rows, hidden}, {.dtype = dtype});
        Tensor gpu_pre = empty({rows, hidden}, {.dtype = dtype, .device = kCuda});
        Tensor gpu_activation = empty({rows, hidden}, {.dtype = dtype, .device = kCuda});
        cuda_checks::cpu_kernels().linear_gelu_forward(input, weight, bias, tanh, pre, activation);
        cuda_checks::gpu_kernels().linear_gelu_forward(input.to(kCuda), weight.to(kCuda),
                                                       with_bias ? bias.to(kCuda) : Tensor(), tanh, gpu_pre,
                                                       gpu_activation);
        check_within_scale(gpu_pre, pre, relative, "pre_activation");
        check_within_scale(gpu_activation, activation, relative, "output");

        // Backward from the same pre-activation on both devices.
        Tensor grad_output = random_normal({rows, out}, dtype, 13);
        Tensor proj_weight = scaled_normal({out, hidden}, dtype, 14, hidden);
        Tensor grad_pre = empty({rows, hidden}, {.dtype = dtype});
        Tensor grad_bias = with_bias ? empty({hidden}, {.dtype = dtype}) : Tensor();
        Tensor gpu_grad_pre = empty({rows, hidden}, {.dtype = dtype, .device = kCuda});
        Tensor gpu_grad_bias = with_bias ? empty({hidden}, {.dtype = dtype, .device = kCuda}) : Tensor();
        cuda_checks::cpu_kernels().linear_gelu_backward(grad_output, proj_weight, pre, tanh, grad_pre, grad_bias);
        cuda_checks::gpu_kernels().linear_gelu_backward(grad_output.to(kCuda), proj_weight.to(kCuda), pre.to(kCuda),
                                                        tanh, gpu_grad_pre, gpu_grad_bias);
        check_within_scale(gpu_grad_pre, grad_pre, relative, "grad_pre");
        // A sum over 37 rows: rounded once from float sums on the GPU, so within a few ulps of its scale.
        if (with_bias) check_within_scale(gpu_grad_bias, grad_bias, relative, "grad_bias");
      }
    }
  }
}
