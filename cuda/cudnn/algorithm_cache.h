// cuda/cudnn/algorithm_cache.h — which cuDNN algorithm each convolution shape runs, chosen
// once per shape (see cuda/cudnn/conv.cpp) and kept for the life of the process.
//
// An entry is a ConvPlan: the descriptors of the call and the chosen algorithm with its
// math type and workspace size, so a repeated shape costs one hash lookup instead of
// descriptor creation plus an algorithm search. The key holds everything the choice
// depends on (ConvKey). Entries never move once inserted: callers keep references.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cuda/cudnn/descriptors.h"

namespace mg::cuda {

enum class ConvDirection : uint8_t { Forward, BackwardData, BackwardFilter };

const char* direction_name(ConvDirection direction);

// Direction, device, dtype, the layout all three tensors have in the call, input / weight /
// output sizes, stride, padding, dilation, groups, the math mode asked for (allow_tf32),
// benchmark mode, and the pointers' alignment (some kernels need 16-byte aligned data).
struct ConvKey {
  std::array<int64_t, 26> fields{};
  bool operator==(const ConvKey& other) const = default;
};

ConvKey make_conv_key(ConvDirection direction, Device device, DType dtype, MemoryFormat layout, const Shape& input,
                      const Shape& weight, const Shape& output, const Window2d& window, cudnnMathType_t math,
                      bool benchmark, int alignment);

// One key's descriptors and chosen algorithm.
struct ConvPlan {
  ConvPlan(ConvDirection direction, DType dtype, MemoryFormat layout, const Shape& input, const Shape& weight,
           const Shape& output, const Window2d& window, cudnnMathType_t math);

  ConvDirection direction;
  cudnn::TensorDescriptor input;   // (N, C, H, W)
  cudnn::FilterDescriptor weight;  // (K, C/groups, R, S)
  cudnn::TensorDescriptor output;  // (N, K, P, Q)
  std::optional<cudnn::TensorDescriptor> bias;  // (1, K, 1, 1), forward only
  cudnn::ConvolutionDescriptor convolution;     // its math type is the chosen algorithm's
  int algorithm = -1;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, per direction
  size_t workspace_bytes = 0;
};

// The plan cached for `key`, or nullptr.
const ConvPlan* find_conv_plan(const ConvKey& key);
// Caches `plan` under `key` and returns the cached one: if another thread cached the same
// key meanwhile, its plan wins and `plan` is dropped.
const ConvPlan& insert_conv_plan(const ConvKey& key, std::unique_ptr<ConvPlan> plan);

// ---- queries, for tests and memory reports ----

struct CudnnAlgorithmChoice {
  ConvDirection direction;
  int algorithm;
  size_t workspace_bytes;
};

// Number of cached plans (one per direction and key).
size_t cudnn_algorithm_cache_size();
std::vector<CudnnAlgorithmChoice> cudnn_algorithm_choices();
// Forgets every plan, so the next call per shape chooses again. Must not run while another
// thread is inside a convolution (it would free the plan that thread uses).
void clear_cudnn_algorithm_cache();

}  // namespace mg::cuda
