// cuda/plan/attention_workspace.cpp — the fused attention backward's workspace (see the
// header).
#include "memgrad/cuda/plan/attention_workspace.h"

namespace mg::cuda {

AttentionBackwardWorkspace attention_backward_workspace(DType dtype, const Shape& q_sizes) {
  const int64_t rows = q_sizes[0] * q_sizes[1] * q_sizes[2], head_dim = q_sizes[3];
  const bool accumulates_in_grad_q = dtype == DType::Float32;
  return {.grad_q_accumulator = accumulates_in_grad_q ? 0 : rows * head_dim, .delta = rows};
}

}  // namespace mg::cuda
