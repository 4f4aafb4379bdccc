// cuda/plan/attention_workspace.cpp — the fused attention backward's workspace (see the
// header).
#include "memgrad/cuda/plan/attention_workspace.h"

namespace mg::cuda {

int64_t attention_backward_key_block(DType dtype, int64_t head_dim, bool dropout) {
  const bool tensor_cores = dtype != DType::Float32;
  // NOTE: BackwardTiles::kBlockN (attention_backward.cu) and SimtTiles::kTile
  // (attention_simt_tiles.cuh), which static_assert that they agree with this.
  return tensor_cores && head_dim <= 64 && !dropout ? 128 : 64;
}

AttentionBackwardWorkspace attention_backward_workspace(DType dtype, const Shape& q_sizes, int64_t key_len,
                                                        bool dropout, bool deterministic) {
  const int64_t rows = q_sizes[0] * q_sizes[1] * q_sizes[2], head_dim = q_sizes[3];
  const int64_t key_block = attention_backward_key_block(dtype, head_dim, dropout);
  const int64_t slices = deterministic ? (key_len + key_block - 1) / key_block : dtype == DType::Float32 ? 0 : 1;
  return {.grad_q_accumulator = slices * rows * head_dim, .delta = rows, .grad_q_slices = slices};
}

}  // namespace mg::cuda
