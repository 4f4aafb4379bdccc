// cuda/cudnn/algorithm_cache.h — which cuDNN engine each convolution shape runs, chosen
// once per shape (see cuda/cudnn/conv_engines.h) and kept for the life of the process.
//
// An entry is a ConvPlan: the finalized execution plan of the chosen engine with its
// workspace size, so a repeated shape costs one hash lookup and one cudnnBackendExecute
// instead of describing the convolution and searching again. The key holds everything the
// choice depends on (ConvKey). Entries never move once inserted: callers keep references.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "memgrad/cuda/cudnn/backend_descriptor.h"
#include "memgrad/cuda/cudnn/descriptors.h"

namespace mg::cuda {

// ForwardStatistics: the forward convolution with batch norm's per-channel statistics of
// its output (sum and sum of squares, float32) generated in the same kernel's epilogue.
// ForwardNormalizedStatistics: the same, convolving relu(x * scale + bias) with per input
// channel scale and bias (the batch norm + ReLU before the convolution) applied as the
// kernel loads x, so that activation is never written.
// BackwardDataAccumulate: backward data adding to what x holds (beta = 1): the input's
// gradient where another branch's gradient of the same input is already there.
// BackwardDataReluBatchNorm: backward data of a convolution whose x was
// relu(batch_norm(z)), with the ReLU's backward (its mask rebuilt from z) and batch norm's
// weight gradients and backward coefficients in the same kernel's epilogue; x receives the
// gradient reaching batch norm's output (ConvOperands' batch_norm fields).
enum class ConvDirection : uint8_t {
  Forward,
  BackwardData,
  BackwardFilter,
  ForwardStatistics,
  ForwardNormalizedStatistics,
  BackwardDataAccumulate,
  BackwardDataReluBatchNorm
};

const char* direction_name(ConvDirection direction);

// Direction, device, dtype, the layout all three tensors have in the call, input / weight /
// output sizes, stride, padding, dilation, groups, whether float32 may use TF32 tensor
// cores (cudnn_allow_tf32), whether only deterministic engines may run, benchmark mode, and the pointers' alignment (some kernels need
// 16-byte aligned data).
struct ConvKey {
  std::array<int64_t, 27> fields{};
  bool operator==(const ConvKey& other) const = default;
};

ConvKey make_conv_key(ConvDirection direction, Device device, DType dtype, MemoryFormat layout, const Shape& input,
                      const Shape& weight, const Shape& output, const Window2d& window, bool allow_tf32,
                      bool deterministic, bool benchmark, int alignment);

// One key's chosen engine, ready to run.
struct ConvPlan {
  ConvDirection direction = ConvDirection::Forward;
  // What the execution plan was built from: the graph's tensors, convolution and operation
  // and the graph itself, shared by the candidates of one choice, and the engine
  // configuration. NOTE: kept alive with the plan, as cudnn_frontend does, because the
  // backend API does not say whether a descriptor set as an attribute may be destroyed.
  std::shared_ptr<const std::vector<cudnn::BackendDescriptor>> graph_parts;
  cudnn::BackendDescriptor engine_config;
  cudnn::BackendDescriptor execution_plan;
  int64_t engine = -1;  // cuDNN's global engine index; -1: no engine runs this key
  size_t workspace_bytes = 0;
  // Fused keys (ForwardStatistics, ForwardNormalizedStatistics, BackwardDataReluBatchNorm)
  // may have no engine (not every shape fuses): that answer is cached too, so the caller
  // falls back at the cost of one lookup.
  bool runnable() const { return engine >= 0; }
  // ForwardNormalizedStatistics only: the dtype the plan reads scale and bias in.
  DType coefficient_dtype = DType::Float32;
  // Forward only: the output and the (1, K, 1, 1) bias as cudnnAddTensor takes them.
  std::optional<cudnn::TensorDescriptor> output;
  std::optional<cudnn::TensorDescriptor> bias;
};

// The plan cached for `key`, or nullptr.
const ConvPlan* find_conv_plan(const ConvKey& key);
// Caches `plan` under `key` and returns the cached one: if another thread cached the same
// key meanwhile, its plan wins and `plan` is dropped.
const ConvPlan& insert_conv_plan(const ConvKey& key, std::unique_ptr<ConvPlan> plan);

// ---- queries, for tests and memory reports ----

struct CudnnAlgorithmChoice {
  ConvDirection direction;
  int64_t engine;  // cuDNN's global engine index
  size_t workspace_bytes;
  DType coefficient_dtype;  // ForwardNormalizedStatistics' scale and bias
};

// Number of cached plans (one per direction and key).
size_t cudnn_algorithm_cache_size();
std::vector<CudnnAlgorithmChoice> cudnn_algorithm_choices();
// Forgets every plan, so the next call per shape chooses again. Must not run while another
// thread is inside a convolution (it would free the plan that thread uses).
void clear_cudnn_algorithm_cache();

}  // namespace mg::cuda
