// cuda/kernels/attention_simt_tiles.cuh — what the float32 fused attention kernels share
// (attention_simt_forward.cu, attention_simt_backward.cu: FlashAttention-2 on the FP32 FMA
// units): the block's layout and tile sizes, the copies of operand tiles into shared memory,
// the register-block products, the writes of result columns, and the host's launch by head
// dim bucket.
//
// One layout serves every product. A block is 256 threads seen as 16 x 16 (ty, tx) working
// on 64 x 64 tiles of the (Tq, Tk) matrix:
//   a product over the head dim (S = Q K^T, dP = dO V^T): thread (ty, tx) computes the 4 x 4
//     register block of rows 4 ty .. 4 ty + 3 and keys tx, tx + 16, tx + 32, tx + 48;
//   a (64, head dim) result (O, dQ by query rows; dK, dV by key rows): the thread owns rows
//     4 ty .. 4 ty + 3 and columns 4 tx + 64 g, g < head dim bucket / 64.
// Operand tiles sit in shared memory as rows of kHeadDim floats padded by 4, read as float4:
// one side of a product is 2 distinct rows a warp (a broadcast), the other 16 consecutive
// rows (the padding puts them in distinct banks) or 16 consecutive float4 of one row; each
// 8 float4 loads feed 64 FMAs. Columns past the head dim are zeros in shared memory. Tiles
// come from global memory by cp.async, 16 bytes a copy when every row of the operands is
// 16-byte aligned (a packed projection with a head dim that is a multiple of 4), else 4;
// results are written 16 bytes at a time under the same rule.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "memgrad/core/tensor.h"
#include "memgrad/cuda/kernels/attention_tiles.cuh"

namespace mg::cuda::attention {

// The configuration of a head dim bucket (64 or 128). Shared memory a block: forward
// 68 KiB at head dim 64, 116 KiB at 128; backward 102 KiB, 166 KiB. With the registers
// ptxas gives (docs/attention_kernels.md), an SM holds 2 blocks at 64 and 1 at 128.
template <int kHeadDim>
struct SimtTiles {
  static_assert(kHeadDim % 64 == 0, "a thread owns columns 4 tx + 64 g");
  static constexpr int kThreads = 256;  // 16 x 16
  static constexpr int kTile = 64;      // query rows and keys of a tile
  static constexpr int kColumnGroups = kHeadDim / 64;
  static constexpr int kStride = kHeadDim + 4;  // floats a padded operand row
  static constexpr int kScoreStride = kTile + 4;  // floats a padded row of a 64 x 64 score tile
  static constexpr int kOperandFloats = kTile * kStride;
  static constexpr int kScoreFloats = kTile * kScoreStride;
  static constexpr int kForwardSharedBytes = (3 * kOperandFloats + kScoreFloats) * 4;   // Q, K, V; P
  static constexpr int kBackwardSharedBytes = (4 * kOperandFloats + 2 * kScoreFloats) * 4;  // K, V, Q, dO; P^T, dS^T
  // The launch bound: at head dim 64 two blocks an SM (<= 128 registers a thread; a cap of
  // 80 for three spills the forward).
  static constexpr int kMinBlocks = kHeadDim <= 64 ? 2 : 1;
};

struct Float4 {
  float value[4];
};
__device__ __forceinline__ Float4 load_float4(const float* shared) {
  const float4 bits = *reinterpret_cast<const float4*>(shared);
  return {{bits.x, bits.y, bits.z, bits.w}};
}
__device__ __forceinline__ void store_float4(float* shared, const float (&values)[4]) {
  *reinterpret_cast<float4*>(shared) = make_float4(values[0], values[1], values[2], values[3]);
}

// Issues the copies of rows [0, 64) x columns [0, kHeadDim) of a global tile (rows
// `row_stride` floats apart) into a padded shared tile; rows >= rows_valid and columns >=
// head_dim are zero-filled. 16 bytes a copy when every row is 16-byte aligned
// (aligned_rows), else 4. Row 0 must exist.
template <int kHeadDim>
__device__ __forceinline__ void load_rows(float* tile, const float* global, int64_t row_stride, int rows_valid,
                                          int head_dim, bool aligned_rows) {
  using Tiles = SimtTiles<kHeadDim>;
  if (aligned_rows) {
    constexpr int kChunksPerRow = kHeadDim / 4;
#pragma unroll
    for (int step = 0; step < Tiles::kTile * kChunksPerRow / Tiles::kThreads; ++step) {
      const int index = step * Tiles::kThreads + threadIdx.x;
      const int row = index / kChunksPerRow, column = index % kChunksPerRow * 4;
      const int bytes = row < rows_valid ? min(max(head_dim - column, 0), 4) * 4 : 0;
      copy_async_16_prefix(shared_address(tile + row * Tiles::kStride + column),
                           bytes > 0 ? global + row * row_stride + column : global, bytes);
    }
  } else {
#pragma unroll 4
    for (int step = 0; step < Tiles::kTile * kHeadDim / Tiles::kThreads; ++step) {
      const int index = step * Tiles::kThreads + threadIdx.x;
      const int row = index / kHeadDim, column = index % kHeadDim;
      const bool valid = row < rows_valid && column < head_dim;
      copy_async_4(shared_address(tile + row * Tiles::kStride + column),
                   valid ? global + row * row_stride + column : global, valid);
    }
  }
}

// Columns [column, column + 4) of a global row, those below head_dim: written (store) or
// added atomically (add); one 16-byte access when all four are and rows are aligned.
__device__ __forceinline__ void store_columns(float* row, int column, const float (&values)[4], int head_dim,
                                              bool aligned_rows) {
  if (aligned_rows && column + 4 <= head_dim) {
    *reinterpret_cast<float4*>(row + column) = make_float4(values[0], values[1], values[2], values[3]);
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (column + e < head_dim) row[column + e] = values[e];
  }
}
__device__ __forceinline__ void add_columns(float* row, int column, const float (&values)[4], int head_dim,
                                            bool aligned_rows) {
  if (aligned_rows && column + 4 <= head_dim) {
    atomicAdd(reinterpret_cast<float4*>(row + column), make_float4(values[0], values[1], values[2], values[3]));
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (column + e < head_dim) atomicAdd(row + column + e, values[e]);
  }
}

// scores[r][c] += a[4 ty + r] . b[tx + 16 c] over the head dim: the register block of a
// product over the head dim, from two padded shared tiles.
template <int kHeadDim>
__device__ __forceinline__ void add_row_products(float (&scores)[4][4], const float* a_tile, const float* b_tile,
                                                 int ty, int tx) {
  constexpr int kStride = SimtTiles<kHeadDim>::kStride;
  // NOTE: unrolled twice, not fully: a full unroll lets the compiler hoist the loads of
  // later steps, which spills the backward at head dim 128 (255 registers) and the forward
  // with dropout at 64 (128); unrolled twice, each step's 8 loads still feed 64 FMAs.
#pragma unroll 2
  for (int d = 0; d < kHeadDim; d += 4) {
    Float4 a[4], b[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) a[r] = load_float4(a_tile + (4 * ty + r) * kStride + d);
#pragma unroll
    for (int c = 0; c < 4; ++c) b[c] = load_float4(b_tile + (tx + 16 * c) * kStride + d);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
#pragma unroll
        for (int c = 0; c < 4; ++c) scores[r][c] = fmaf(a[r].value[e], b[c].value[e], scores[r][c]);
      }
    }
  }
}

// result[r][g] (columns 4 tx + 64 g) += sum_i weights[4 ty + r][i] x rows[i]: a result
// block of a product over a tile's 64 rows; `weights` is a padded 64 x 64 score tile,
// `rows` a padded operand tile.
template <int kHeadDim>
__device__ __forceinline__ void add_weighted_rows(float (&result)[4][SimtTiles<kHeadDim>::kColumnGroups][4],
                                                  const float* weights, const float* rows, int ty, int tx) {
  using Tiles = SimtTiles<kHeadDim>;
#pragma unroll 4
  for (int i = 0; i < Tiles::kTile; i += 4) {
    Float4 weight[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) weight[r] = load_float4(weights + (4 * ty + r) * Tiles::kScoreStride + i);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
      for (int g = 0; g < Tiles::kColumnGroups; ++g) {
        const Float4 row = load_float4(rows + (i + s) * Tiles::kStride + 64 * g + 4 * tx);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
#pragma unroll
          for (int e = 0; e < 4; ++e) result[r][g][e] = fmaf(weight[r].value[s], row.value[e], result[r][g][e]);
        }
      }
    }
  }
}

// ---- host side ----

// Whether 16-byte accesses to every row of each operand are aligned.
inline bool all_rows_aligned(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* tensor : tensors) {
    if (!rows_aligned_16(*tensor)) return false;
  }
  return true;
}

// A float32 tensor's elements, where its strides say.
inline const float* float_data(const Tensor& tensor) { return static_cast<const float*>(tensor.raw_data()); }
inline float* mutable_float_data(const Tensor& tensor) { return static_cast<float*>(tensor.raw_data()); }

// Runs kernel<kHeadDim, kDropout> for the head dim bucket and dropout of a call.
template <template <int, bool> class Launch, class... Args>
void launch_for(int64_t head_dim, bool dropout, Args&&... args) {
  if (head_dim <= 64) {
    if (dropout) Launch<64, true>::run(args...);
    else Launch<64, false>::run(args...);
  } else {
    if (dropout) Launch<128, true>::run(args...);
    else Launch<128, false>::run(args...);
  }
}

}  // namespace mg::cuda::attention
