// cuda/cudnn/conv_graph.h — one convolution call as cuDNN's backend (graph) API describes
// it: what is convolved (ConvProblem), the call's device pointers (ConvOperands), the
// operation graph built from the one, and the variant pack that binds the other to the
// graph's tensors.
//
// The graph has one operation, the convolution; the fused forward directions add GEN_STATS
// after it, and ForwardNormalizedStatistics a pointwise scale, bias and ReLU before it;
// BackwardDataReluBatchNorm adds the ReLU's backward and BN_BWD_WEIGHTS after it. Which
// engine runs a graph, and running it: cuda/cudnn/conv_engines.h.
#pragma once

#include <cudnn.h>

#include <memory>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/cuda/cudnn/algorithm_cache.h"
#include "memgrad/cuda/cudnn/backend_descriptor.h"

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

// The directions that fuse work into the convolution: cuDNN may have no engine for their
// graph, which is then an answer ("no engine", cached), not an error.
bool is_fused(ConvDirection direction);

// y = conv(x, w) (or its backward) as a graph, with what the direction fuses (see above;
// ForwardNormalizedStatistics' scale and bias in `coefficients`). The graph is the last of
// the returned descriptors; the others are its parts, which must live as long as it. Null
// when cuDNN cannot describe a fused direction's graph; throws mg::Error for the others.
std::shared_ptr<std::vector<BackendDescriptor>> operation_graph(cudnnHandle_t handle, const ConvProblem& problem,
                                                                DType coefficients);

// The variant pack of one run of a `direction` graph: `data`'s pointers bound to the
// graph's tensors in memory, and `workspace` (or nullptr), finalized.
BackendDescriptor variant_pack(ConvDirection direction, const ConvOperands& data, void* workspace);

}  // namespace mg::cuda::cudnn
