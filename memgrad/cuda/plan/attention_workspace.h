// cuda/plan/attention_workspace.h — the float32 WORKSPACE tensor one fused attention
// backward borrows, for q of sizes (B, H, Tq, D):
//   float16 / bfloat16 (cuda/kernels/attention_backward.cu): the (B, H, Tq, D) dQ
//     accumulator the tensor-core kernel adds into with float32 atomics, then the
//     (B, H, Tq) D = rowsum(dO o O);
//   float32 (cuda/kernels/attention_simt_backward.cu): D alone, since its kernel adds dQ
//     into the float32 grad_q itself.
//
// Host arithmetic only, built in every build, for the kernels and the memory predictor
// (memory/cuda_scratch_model.cpp) alike.
#pragma once

#include <cstdint>

#include "memgrad/core/dtype.h"
#include "memgrad/core/shape.h"

namespace mg::cuda {

inline constexpr DType kAttentionWorkspaceDType = DType::Float32;

// Elements of kAttentionWorkspaceDType, in this order.
struct AttentionBackwardWorkspace {
  int64_t grad_q_accumulator;  // B H Tq D, or 0 for float32
  int64_t delta;               // B H Tq
  int64_t elements() const { return grad_q_accumulator + delta; }
};

AttentionBackwardWorkspace attention_backward_workspace(DType dtype, const Shape& q_sizes);

}  // namespace mg::cuda
