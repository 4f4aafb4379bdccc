// cuda/linear_gelu.cpp — linear_gelu_forward and linear_gelu_backward (core/kernel_list.h) on
// CUDA: one cuBLASLt product with a GELU epilogue (cuda/lt_matmul.h) each way, tanh form.
//
// Forward, row-major: pre (rows, hidden) = x (rows, in) W (hidden, in)^T + b is, column-major,
// D (hidden, rows) = W^T-read (TRANSA = T) times x: as linear_forward. GELU_AUX_BIAS writes
// the pre-activation to the aux matrix and gelu_tanh of it to D; both are (hidden, rows)
// column-major, i.e. the row-major (rows, hidden) tensors, aux leading dimension hidden.
// Backward, row-major: grad_pre (rows, hidden) = grad_y (rows, out) W (out, hidden) is,
// column-major, D (hidden, rows) = W (read as the (hidden, out) matrix, TRANSA = N) times
// grad_y (the (out, rows) matrix). DGELU multiplies D by gelu_tanh'(aux = pre); BGRAD sums
// D over its columns (n = rows) into a vector as long as its rows (hidden): the bias
// gradient, summed over the batch, as the kernel list asks.
//
// NOTE: cuBLASLt's GELU epilogues compute the tanh approximation (GPT-2's "gelu_new"), so
// the exact (erf) form, float64, a hidden size that is not a multiple of 8 (cuBLASLt's rule
// for the aux matrix's leading dimension) and any shape the heuristic declines run the
// unfused kernels instead: the product, then gelu (forward), or the product, gelu's
// gradient and a column sum (backward). Values then equal the CPU kernels' orders of
// rounding; the epilogues differ from them by computing gelu from the product before it is
// rounded to a 16-bit dtype.
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
  const int64_t rows = grad_pre.sizes()[0], hidden = grad_pre.sizes()[1], out_features = weight.sizes()[0];
  if (grad_pre.numel() == 0 && (!grad_bias.defined() || grad_bias.numel() == 0)) return;
  DeviceGuard guard(grad_pre.device());
  const bool fused = tanh && lt_matmul({.a = weight,
                                        .transpose_a = false,
                                        .b = grad_output,
                                        .d = grad_pre,
                                        .m = hidden,
                                        .n = rows,
                                        .k = out_features,
                                        .epilogue = grad_bias.defined() ? LtEpilogue::DGeluBiasGrad : LtEpilogue::DGelu,
                                        .bias = grad_bias,
                                        .aux = pre_activation});
  if (!fused) {
    linear_gelu_backward_in_steps(kernel_table(), grad_output, weight, pre_activation, tanh, grad_pre, grad_bias);
  }
}

}  // namespace mg::cuda
