// cuda/cudnn/conv_engines.h — choosing how cuDNN runs one convolution shape, and running it,
// through the backend (graph) API.
//
// A choice is made once per ConvKey (cuda/cudnn/algorithm_cache.h): the convolution is
// described as a graph (one operation; the fused forward directions add GEN_STATS after it,
// and ForwardNormalizedStatistics a pointwise scale, bias and ReLU before it;
// BackwardDataReluBatchNorm adds the ReLU's backward and BN_BWD_WEIGHTS after it); cuDNN's
// heuristics (mode A, then the fallback list) rank the engine configurations that can run
// it; configurations whose numerical notes the settings forbid are dropped (float32 without
// allow_tf32: no tensor cores; inputs rounded down to a narrower type only where the
// prologue's float32 result feeds a 16-bit convolution; reductions in reduced precision only
// for 16-bit convolutions: the notes PyTorch drops, so both run the same engines); each
// remaining one is finalized into an execution plan. With benchmark off the first plan that
// finalizes within the workspace limit wins; with benchmark on every such plan is timed on
// the call's own tensors and the fastest wins. Running a plan is one variant pack (the
// call's pointers) and one cudnnBackendExecute.
#pragma once

#include <cudnn.h>

#include <memory>

#include "memgrad/core/tensor.h"
#include "memgrad/cuda/cudnn/algorithm_cache.h"

namespace mg::cuda::cudnn {

// BackwardDataReluBatchNorm's batch norm, whose output went through a ReLU into the
// convolution: what its forward read (input z, in the data's dtype and x's sizes; the (C)
// float32 saved mean and invstd, weight and bias) and the (C) float32 results: the weight
// and bias gradients, and the coefficients of its input's gradient,
// grad z = grad_scale * g + input_scale * z + offset, g being what the call writes to x.
struct BatchNormOperands {
  void* input = nullptr;
  void* mean = nullptr;
  void* invstd = nullptr;
  void* weight = nullptr;
  void* bias = nullptr;
  void* grad_weight = nullptr;
  void* grad_bias = nullptr;
  void* grad_scale = nullptr;
  void* input_scale = nullptr;
  void* offset = nullptr;
};

// Device pointers of one call: x (input), w (weight), y (output), whichever is written;
// ForwardStatistics and ForwardNormalizedStatistics also write the (K) float32 sum and sum
// of squares of y per channel, and ForwardNormalizedStatistics reads the (C) scale and bias
// of x's channels, in the plan's coefficient_dtype. BackwardDataReluBatchNorm reads y (the
// gradient of the convolution's output) and batch_norm's inputs, and writes x (the
// gradient reaching batch norm's output through the ReLU) and batch_norm's results.
struct ConvOperands {
  void* input;
  void* weight;
  void* output;
  void* sum = nullptr;
  void* square_sum = nullptr;
  void* scale = nullptr;
  void* bias = nullptr;
  BatchNormOperands batch_norm{};
};

// What is convolved: all three tensors dense in `layout`. It refers to the caller's sizes
// and window, so a call describes itself without copying them.
struct ConvProblem {
  ConvDirection direction;
  DType dtype;
  MemoryFormat layout;
  const Shape& input;   // (N, C, H, W)
  const Shape& weight;  // (K, C/groups, R, S)
  const Shape& output;  // (N, K, P, Q)
  const Window2d& window;
  bool allow_tf32;     // float32 only
  bool deterministic;  // only engines cuDNN does not mark nondeterministic
  int alignment;    // bytes every pointer is aligned to (at most 16)
};

// Chooses the engine for `problem` (see above), running candidates on `data` only in
// benchmark mode. Throws mg::Error when no engine fits cudnn_workspace_limit(), except for
// the fused directions (ForwardStatistics, ForwardNormalizedStatistics,
// BackwardDataReluBatchNorm), whose answer is then a plan that is not runnable() (the caller
// runs the pieces apart).
// ForwardNormalizedStatistics' scale and bias are float32 where cuDNN has an engine for
// that, else the data's dtype (ConvPlan::coefficient_dtype says which).
std::unique_ptr<ConvPlan> choose_conv_plan(cudnnHandle_t handle, Device device, const ConvProblem& problem,
                                           bool benchmark, const ConvOperands& data);

// Runs `plan` on `data` with `workspace` (plan.workspace_bytes bytes, or nullptr for none)
// on the handle's stream.
void run_conv_plan(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& data, void* workspace);

// Scratch memory from the caching allocator, tagged WORKSPACE; undefined for 0 bytes.
Tensor borrow_workspace(size_t bytes, Device device);

}  // namespace mg::cuda::cudnn
