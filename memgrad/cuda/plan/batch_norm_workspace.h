// cuda/plan/batch_norm_workspace.h — the one WORKSPACE tensor each CUDA batch-norm call
// borrows (cuda/kernels/batch_norm.cu): (5, C) per-channel coefficients, then, when the
// call reduces over the channels (the training forward, the backward), the (2, chunks, C)
// partial sums of channel_reduce (cuda/plan/channel_reduce_plan.h). Accumulated in float64
// for float64 inputs and in float32 otherwise.
//
// Host arithmetic only, built in every build, for the kernels and the memory predictor
// (memory/cuda_scratch_model.cpp) alike.
#pragma once

#include <cstdint>

#include "memgrad/core/dtype.h"
#include "memgrad/core/tensor.h"

namespace mg::cuda {

// Per channel: the most coefficients any pass reads (batch_norm.cu's GradInputElement).
inline constexpr int64_t kBatchNormCoefficients = 5;

// The dtype of the statistics, the coefficients and the partial sums for an input of `input`.
constexpr DType batch_norm_accumulate_dtype(DType input) {
  return input == DType::Float64 ? DType::Float64 : DType::Float32;
}

// Elements of the workspace: the coefficients, and the partial sums of `chunks` chunks per
// channel when `with_partials`.
int64_t batch_norm_workspace_elements(int64_t channels, int64_t chunks, bool with_partials);

// A per-channel tensor the backward reads (the saved mean and invstd, the weight, the bias)
// as a plain contiguous array of `accumulate`: itself when it is one (the usual case:
// float32 statistics and parameters), else a WORKSPACE copy converted to it, for the call;
// undefined stays undefined (no weight, no bias).
Tensor batch_norm_channel_operand(const Tensor& values, DType accumulate);

}  // namespace mg::cuda
