// cuda/cudnn/conv.h — 2-D convolution through cuDNN: forward (with bias), backward data and
// backward filter, for float32, float64, float16 and bfloat16, NCHW and channels_last.
// cuda/kernels/conv.cu calls these when cudnn_conv_usable() says so; the contract is the
// kernel table's (core/kernels.h): every tensor dense in NCHW or channels_last, outputs
// overwritten (backward data with `accumulate` adds into grad_input: beta = 1). Declared
// without cuDNN types, so nvcc-compiled callers need no cudnn.h.
#pragma once

#include "memgrad/core/kernels.h"
#include "memgrad/core/tensor.h"

namespace mg::cuda::cudnn {

// Whether cuDNN runs this convolution: cudnn_enabled(), no tensor empty (cuDNN rejects a
// zero batch or zero channels), and each tensor small enough for cuDNN's 32-bit
// descriptors (under 2^31 elements).
bool conv_usable(const Tensor& input, const Tensor& weight, const Tensor& output);

void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
            const Tensor& output);
// The forward convolution with batch norm's statistics of its output fused into it: sum and
// square_sum (K, float32) get the per-channel sum and sum of squares of output over
// (N, P, Q). Only for 16-bit data with all three tensors dense in channels_last and no
// bias; false (nothing written) when that does not hold or cuDNN has no engine for the
// shape, with set_cudnn_fusion off (on by default) or set_cudnn_deterministic on, and the
// caller computes them apart.
bool conv2d_with_statistics(const Tensor& input, const Tensor& weight, const Window2d& window,
                            const Tensor& output, const Tensor& sum, const Tensor& square_sum);
// The forward convolution of relu(input * scale + bias) with the statistics of its output,
// as one cuDNN graph (ConvBNfprop): batch norm + ReLU applied per input channel while the
// convolution loads its input, so that activation is never written. input, weight and
// output are float16 or bfloat16 (all one dtype) dense in channels_last; scale and bias are
// (C) float32, one per input channel (batch norm's invstd * gamma and beta - mean * scale);
// sum and square_sum (K) float32 as conv2d_with_statistics writes them. The prologue
// computes in float32 and the convolution reads its result unrounded. A call breaking that
// contract throws mg::Error; false (nothing written) when cuDNN has no engine for the shape,
// with set_cudnn_fusion off (on by default) or set_cudnn_deterministic on.
bool conv2d_normalized_with_statistics(const Tensor& input, const Tensor& scale, const Tensor& bias,
                                       const Tensor& weight, const Window2d& window, const Tensor& output,
                                       const Tensor& sum, const Tensor& square_sum);
void conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                           const Tensor& grad_input, bool accumulate);

// Batch norm whose output went through a ReLU into a convolution (training): what its
// forward read and saved, input z in the convolution's data dtype and sizes, dense in
// channels_last, and (C) float32 mean, invstd, weight and bias ...
struct BatchNormSaved {
  Tensor input, mean, invstd, weight, bias;
};
// ... and its backward's (C) float32 results: the weight and bias gradients, and the
// coefficients of its input's gradient, grad z = grad_scale * g + input_scale * z + offset,
// g being the gradient reaching its output through the ReLU.
struct BatchNormGradients {
  Tensor grad_weight, grad_bias, grad_scale, input_scale, offset;
};
// The convolution's backward data with the ReLU's backward and batch norm's backward sums
// in its epilogue, as one cuDNN graph (DgradDreluBNBwdWeight): grad_normalized = g, the
// data gradient masked where batch norm's output, rebuilt from z as
// ((z - mean) * invstd) * weight + bias, is not positive; and `gradients`, as above. The
// data are float16 or bfloat16, all of one dtype, dense in channels_last (grad_normalized
// of z's sizes). A call breaking that contract throws mg::Error; false (nothing written)
// when cuDNN has no engine for the shape, with set_cudnn_backward_fusion off (it is on by
// default) or set_cudnn_deterministic on.
bool conv2d_backward_input_relu_batch_norm(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                                           const BatchNormSaved& saved, const Tensor& grad_normalized,
                                           const BatchNormGradients& gradients);
void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight);

}  // namespace mg::cuda::cudnn
