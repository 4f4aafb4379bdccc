// cuda/linear_gelu.cpp — linear_gelu_forward and linear_gelu_backward (core/kernel_list.h) on
// CUDA: forward, one cuBLASLt product with a GELU epilogue (cuda/lt_matmul.h), tanh form;
// backward, the unfused steps (core/linear_gelu_steps.h).
//
// Forward, row-major: pre (rows, hidden) = x (rows, in) W (hidden, in)^T + b is, column-major,
// D (hidden, rows) = W^T-read (TRANSA = T) times x: as linear_forward. GELU_AUX_BIAS writes
// the pre-activation to the aux matrix and gelu_tanh of it to D; both are (hidden, rows)
// column-major, i.e. the row-major (rows, hidden) tensors, aux leading dimension hidden.
//
// Backward: the product, gelu's gradient in place and the bias gradient's column sum, each
// the kernel table's. cuBLASLt's DGELU_BGRAD epilogue computes the same in one call, but on
// an H100 (CUDA 13.0, commit 35f1c04, 2026-12-07, bench/kernel_profile.py on GPT-2 b16 bf16)
// it ran the plain product and then a separate epilogue::globalKernel of 0.35 ms per c_fc
// (16384 x 3072): 4.2 ms of a 43 ms step, where PyTorch's gelu backward kernel takes 0.09 ms.
// tests/cuda/test_cuda_mlp_timing.cpp ("[mlp-timing]") times DGELU_BGRAD, DGELU + the column
// sum, and these steps at that shape, for the choice to follow the measurement.
//
// NOTE: cuBLASLt's GELU epilogues compute the tanh approximation (GPT-2's "gelu_new"), so
// the exact (erf) form, float64, a hidden size that is not a multiple of 8 (cuBLASLt's rule
// for the aux matrix's leading dimension) and any shape the heuristic declines run the
// unfused forward instead: the product, then gelu. Values then equal the CPU kernels'
// orders of rounding; the epilogue differs from them by computing gelu from the product
// before it is rounded to a 16-bit dtype.
#include <cstdint>

#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/linear_gelu_steps.h"
#include "memgrad/core/tensor.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/lt_matmul.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

bool dense(const Tensor& t) { return !t.defined() || t.numel() == 0 || t.is_contiguous(); }

}  // namespace

void linear_gelu_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, bool tanh,
                         const Tensor& pre_activation, const Tensor& output) {
  MG_ASSERT(dense(input) && dense(weight) && dense(bias) && dense(pre_activation) && dense(output),
            "linear_gelu_forward takes contiguous tensors");
  const int64_t rows = input.sizes()[0], in_features = input.sizes()[1], hidden = weight.sizes()[0];
  if (rows == 0 || hidden == 0) return;
  DeviceGuard guard(output.device());
  const bool fused = tanh && lt_matmul({.a = weight,
                                        .transpose_a = true,
                                        .b = input,
                                        .d = output,
                                        .m = hidden,
                                        .n = rows,
                                        .k = in_features,
                                        .epilogue = bias.defined() ? LtEpilogue::GeluAuxBias : LtEpilogue::GeluAux,
                                        .bias = bias,
                                        .aux = pre_activation});
  if (!fused) linear_gelu_forward_in_steps(kernel_table(), input, weight, bias, tanh, pre_activation, output);
}

void linear_gelu_backward(const Tensor& grad_output, const Tensor& weight, const Tensor& pre_activation, bool tanh,
                          const Tensor& grad_pre, const Tensor& grad_bias) {
  MG_ASSERT(dense(grad_output) && dense(weight) && dense(pre_activation) && dense(grad_pre) && dense(grad_bias),
            "linear_gelu_backward takes contiguous tensors");
  if (grad_pre.numel() == 0 && (!grad_bias.defined() || grad_bias.numel() == 0)) return;
  DeviceGuard guard(grad_pre.device());
  linear_gelu_backward_in_steps(kernel_table(), grad_output, weight, pre_activation, tanh, grad_pre, grad_bias);
}

}  // namespace mg::cuda
