// tests/cuda/test_cuda_mlp_timing.cpp — a hidden case ("[mlp-timing]") that times the fused
// MLP's backward product at GPT-2 124M's c_fc (rows = 16 x 1024, 768 -> 3072, bfloat16) in
// the three ways cuda/linear_gelu.cpp could run it: cuBLASLt's DGELU_BGRAD epilogue (bias
// gradient in the epilogue), DGELU and then the kernel table's column sum (what it runs),
// and the plain product, gelu's gradient and the column sum (the unfused steps). It prints
// the times and asserts only that the three agree; it is run by hand or by scripts/gpu-check.
#include <catch2/catch.hpp>

#include <cstdio>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/linear_gelu_steps.h"
#include "memgrad/cuda/lt_matmul.h"
#include "cuda/gpu_timing.h"
#include "cuda/kernel_checks.h"

using namespace mg;

TEST_CASE("Timing: the MLP's backward product at GPT-2's c_fc, bias gradient in cuBLASLt's epilogue or not",
          "[.][mlp-timing]") {
  NoGradGuard no_grad;
  const int64_t rows = 16 * 1024, hidden = 3072, out = 768;
  const DType dtype = DType::BFloat16;
  const TensorOptions options{.dtype = dtype, .device = cuda_checks::kCuda};
  const Tensor grad_output = cuda_checks::random_normal({rows, out}, dtype, 1).to(cuda_checks::kCuda);
  const Tensor weight = cuda_checks::random_normal({out, hidden}, dtype, 2, 0.03).to(cuda_checks::kCuda);
  const Tensor pre = cuda_checks::random_normal({rows, hidden}, dtype, 3).to(cuda_checks::kCuda);
  const Tensor grad_pre = empty({rows, hidden}, options), grad_bias = empty({hidden}, options);
  const KernelTable& kernel = cuda_checks::gpu_kernels();

  auto product = [&](cuda::LtEpilogue epilogue) {
    return cuda::LtProduct{.a = weight, .transpose_a = false, .b = grad_output, .d = grad_pre, .m = hidden, .n = rows,
                           .k = out, .epilogue = epilogue,
                           .bias = epilogue == cuda::LtEpilogue::DGeluBiasGrad ? grad_bias : Tensor(), .aux = pre};
  };
  auto bias_in_epilogue = [&] { REQUIRE(cuda::lt_matmul(product(cuda::LtEpilogue::DGeluBiasGrad))); };
  auto bias_by_column_sum = [&] {
    REQUIRE(cuda::lt_matmul(product(cuda::LtEpilogue::DGelu)));
    linear_bias_gradient(kernel, grad_pre, grad_bias);
  };
  auto unfused = [&] { linear_gelu_backward_in_steps(kernel, grad_output, weight, pre, true, grad_pre, grad_bias); };

  // The three agree before any is timed.
  unfused();
  const Tensor steps_pre = contiguous_copy(grad_pre), steps_bias = contiguous_copy(grad_bias);
  bias_in_epilogue();
  cuda_checks::check_within_scale(grad_pre, steps_pre, 4e-2, "grad_pre, DGELU_BGRAD");
  cuda_checks::check_within_scale(grad_bias, steps_bias, 4e-2, "grad_bias, DGELU_BGRAD");
  bias_by_column_sum();
  cuda_checks::check_within_scale(grad_pre, steps_pre, 4e-2, "grad_pre, DGELU + column sum");
  cuda_checks::check_within_scale(grad_bias, steps_bias, 4e-2, "grad_bias, DGELU + column sum");

  const double epilogue_ms = gpu_timing::median_ms(bias_in_epilogue);
  const double column_sum_ms = gpu_timing::median_ms(bias_by_column_sum);
  const double unfused_ms = gpu_timing::median_ms(unfused);
  std::printf("mlp backward product, rows %lld, %lld -> %lld, bf16: DGELU_BGRAD %.3f ms | DGELU + column sum %.3f ms | "
              "product, gelu backward, column sum %.3f ms\n",
              static_cast<long long>(rows), static_cast<long long>(out), static_cast<long long>(hidden), epilogue_ms,
              column_sum_ms, unfused_ms);
}
