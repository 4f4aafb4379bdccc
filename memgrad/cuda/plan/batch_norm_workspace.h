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
#include "memgrad/cuda/plan/channel_reduce_plan.h"

namespace mg::cuda {

// Per channel: the most coefficients any pass reads (batch_norm.cu's GradInputElement).
inline constexpr int64_t kBatchNormCoefficients = 5;

// The dtype of the statistics, the coefficients and the partial sums for an input of `input`.
constexpr DType batch_norm_accumulate_dtype(DType input) {
  return input == DType::Float64 ? DType::Float64 : DType::Float32;
}

// Whether a training forward given its statistics (a convolution's epilogue) finishes them
// inside its normalising pass, borrowing no workspace: in the rows layout (channels-last,
// (N, C)), where each thread of the pass keeps its channels (batch_norm.cu's
// GivenStatistics). It reads the sums, the weight and the bias as plain arrays of the
// accumulate dtype (batch_norm_channel_operand). Elsewhere a finishing launch stores the
// coefficients in the workspace.
inline bool batch_norm_finishes_given_in_pass(const channel_reduce::ChannelExtent& extent) { return extent.rows; }

// Elements of the workspace: the coefficients, and the partial sums of `chunks` chunks per
// channel when `with_partials`.
int64_t batch_norm_workspace_elements(int64_t channels, int64_t chunks, bool with_partials);

// A per-channel tensor the backward reads (the saved mean and invstd, the weight, the bias)
// as a plain contiguous array of `accumulate`: itself when it is one (the usual case:
// float32 statistics and parameters), else a WORKSPACE copy converted to it, for the call;
// undefined stays undefined (no weight, no bias).
Tensor batch_norm_channel_operand(const Tensor& values, DType accumulate);

}  // namespace mg::cuda
