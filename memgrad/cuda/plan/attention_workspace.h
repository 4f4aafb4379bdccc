// cuda/plan/attention_workspace.h — the float32 WORKSPACE tensor one fused attention
// backward borrows, for q of sizes (B, H, Tq, D):
//   float16 / bfloat16 (cuda/kernels/attention_backward.cu): the (B, H, Tq, D) dQ
//     accumulator the tensor-core kernel adds into with float32 atomics, then the
//     (B, H, Tq) D = rowsum(dO o O);
//   float32 (cuda/kernels/attention_simt_backward.cu): D alone, since its kernel adds dQ
//     into the float32 grad_q itself.
// With deterministic algorithms (core/determinism.h) the accumulator has one (B, H, Tq, D)
// slice per block of keys (attention_backward_key_block): each block writes its share of
// dQ into its own slice, and the slices are summed in key order, instead of every block
// adding into one accumulator with atomics in an order that varies. float32 then borrows
// the slices too. The cost: ceil(Tk / key block) times the accumulator, so WORKSPACE
// grows as Tq Tk rather than Tq.
//
// Host arithmetic only, built in every build, for the kernels and the memory predictor
// (memory/cuda_scratch_model.cpp) alike.
#pragma once

#include <cstdint>

#include "memgrad/core/dtype.h"
#include "memgrad/core/shape.h"

namespace mg::cuda {

inline constexpr DType kAttentionWorkspaceDType = DType::Float32;

// Keys one block of the fused backward owns: the tensor-core kernel's 128 for 16-bit
// dtypes at head dim <= 64 without dropout, else 64; the float32 kernel's 64.
int64_t attention_backward_key_block(DType dtype, int64_t head_dim, bool dropout);

// Elements of kAttentionWorkspaceDType, in this order.
struct AttentionBackwardWorkspace {
  int64_t grad_q_accumulator;  // grad_q_slices x B H Tq D
  int64_t delta;               // B H Tq
  // Slices of the accumulator: 1 (16-bit), 0 (float32), ceil(Tk / key block) when deterministic.
  int64_t grad_q_slices;
  int64_t elements() const { return grad_q_accumulator + delta; }
};

AttentionBackwardWorkspace attention_backward_workspace(DType dtype, const Shape& q_sizes, int64_t key_len,
                                                        bool dropout, bool deterministic);

}  // namespace mg::cuda
