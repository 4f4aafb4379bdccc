// cuda/kernels/attention_simt.cu — fused attention (FlashAttention-2) for float32 on the FP32
// FMA units, forward and backward: no tensor cores and no TF32, so every product is as exact
// as PyTorch's float32 default (whose memory-efficient kernel is SIMT too). The contract is
// core/kernels.h's; any head dim in [1, 128] and any row strides are read in place.
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
//
// Forward, a block per 64 query rows of one (batch, head), walking the key tiles (the ones
// above the diagonal skipped with is_causal):
//   S = scale Q K^T, masked (keys past Tk; with is_causal, key > query);
//   online softmax in registers: each row's running maximum (the same in the 16 threads
//     sharing the row) and each thread's partial sum, both rescaled by exp(m_old - m_new)
//     with the output accumulators when the maximum grows; P = exp(S - m), summed before
//     dropout, dropped by the contract's rule (kept weights are scaled by 1 / (1 - p) once,
//     at the end) and written to shared memory;
//   O += P V in registers.
//   V(n) is copied while S(n) is computed and K(n + 1) while P V(n) is: one buffer each,
//   two barriers a tile. At the end O = acc / l and lse = m + log l.
// Backward, a block per 64 keys, walking the query tiles that attend to them, after the
// prepare kernel (D = rowsum(dO o O) and grad_q zeroed):
//   S = Q K^T and dP = dO V^T (registers); P = exp(scale S - lse), masked;
//   with Z the dropout mask and r = 1 / (1 - p): (P o Z r)^T and dS^T = (scale P o (dP o Z r
//     - D))^T to shared memory;
//   dV += (P o Z r)^T dO and dK += dS^T Q (registers, written once at the end);
//   dQ = dS K added into grad_q by float32 atomics: grad_q is float32 itself, so no
//   accumulator in a workspace (only D is: cuda/plan/attention_workspace.h).
//   Q(m + 1) and dO(m + 1) are copied while dQ(m) is computed.
#include <cmath>
#include <initializer_list>

#include "memgrad/core/factory.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/attention_tiles.cuh"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/plan/attention_workspace.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda::attention {

namespace {

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

// Maximum / sum over the 16 lanes (one tx row of the 16 x 16 layout) sharing a row.
__device__ __forceinline__ float max_over_row(float value) {
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
__device__ __forceinline__ float sum_over_row(float value) {
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
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

// ---- forward ----

struct ForwardArgs {
  const float* q;  // (B, H, Tq, D)
  const float* k;  // (B, H, Tk, D)
  const float* v;  // (B, H, Tk, D)
  float* output;   // (B, H, Tq, D)
  float* log_sum_exp;  // (B, H, Tq) contiguous
  HeadStrides q_strides, k_strides, v_strides, output_strides;
  int heads, query_len, key_len, head_dim;
  bool causal;
  bool vector_reads;   // every row of q, k and v 16-byte aligned
  bool vector_writes;  // every row of output 16-byte aligned
  float scale;
  float dropout_p;      // compared with the uniform as float(p), as the contract says
  float output_factor;  // 1 / (1 - p)
  PhiloxState rng;
};

template <int kHeadDim, bool kDropout>
__global__ void __launch_bounds__(SimtTiles<kHeadDim>::kThreads, SimtTiles<kHeadDim>::kMinBlocks)
    simt_forward_kernel(ForwardArgs args) {
  using Tiles = SimtTiles<kHeadDim>;
  constexpr int kTile = Tiles::kTile, kGroups = Tiles::kColumnGroups;
  extern __shared__ float4 shared_vectors[];
  float* q_tile = reinterpret_cast<float*>(shared_vectors);  // (64, kStride)
  float* k_tile = q_tile + Tiles::kOperandFloats;            // (64, kStride)
  float* v_tile = k_tile + Tiles::kOperandFloats;            // (64, kStride)
  float* p_tile = v_tile + Tiles::kOperandFloats;            // (64 queries, kScoreStride)

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int query_tiles = (args.query_len + kTile - 1) / kTile;
  const BlockTile place = block_tile(static_cast<int>(gridDim.x) / query_tiles);
  const int batch_head = place.batch_head, b = batch_head / args.heads, h = batch_head % args.heads;
  const int m0 = (query_tiles - 1 - place.tile_rank) * kTile;  // rank 0: the last tile, the most keys (is_causal)
  const int key_end = args.causal ? min(args.key_len, m0 + kTile) : args.key_len;
  const int key_tiles = (key_end + kTile - 1) / kTile;
  const float* k_rows = row_pointer(args.k, args.k_strides, b, h, 0);
  const float* v_rows = row_pointer(args.v, args.v_strides, b, h, 0);

  load_rows<kHeadDim>(q_tile, row_pointer(args.q, args.q_strides, b, h, m0), args.q_strides.row,
                      args.query_len - m0, args.head_dim, args.vector_reads);
  load_rows<kHeadDim>(k_tile, k_rows, args.k_strides.row, args.key_len, args.head_dim, args.vector_reads);
  copy_async_commit();

  // Rows 4 ty + r: the output accumulators (columns 4 tx + 64 g), the running maximum of
  // the scaled scores, and the sum of this thread's weights (its keys only).
  float acc[4][kGroups][4] = {};
  float row_max[4], row_sum[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }

  for (int key_tile = 0; key_tile < key_tiles; ++key_tile) {
    const int n0 = key_tile * kTile;
    copy_async_wait_all();
    __syncthreads();  // K(n) is in; every thread is done with V(n - 1) and P(n - 1)
    load_rows<kHeadDim>(v_tile, v_rows + n0 * args.v_strides.row, args.v_strides.row, args.key_len - n0,
                        args.head_dim, args.vector_reads);
    copy_async_commit();

    float scores[4][4] = {};
    add_row_products<kHeadDim>(scores, q_tile, k_tile, ty, tx);

    const bool needs_mask = n0 + kTile > args.key_len || (args.causal && n0 + kTile - 1 > m0);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int query = m0 + 4 * ty + r;
      float tile_max = -INFINITY;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int key = n0 + tx + 16 * c;
        scores[r][c] *= args.scale;
        if (needs_mask && (key >= args.key_len || (args.causal && key > query))) scores[r][c] = -INFINITY;
        tile_max = fmaxf(tile_max, scores[r][c]);
      }
      const float new_max = fmaxf(row_max[r], max_over_row(tile_max));
      // NOTE: a row with every key masked so far keeps m = -inf; shifting by 0 then keeps
      // exp(-inf - shift) = 0 instead of NaN.
      const float shift = new_max == -INFINITY ? 0.0f : new_max;
      const float rescale = exp2f((row_max[r] - shift) * kLog2e);
      row_max[r] = new_max;
      row_sum[r] *= rescale;
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[r][g][e] *= rescale;
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        float weight = exp2f((scores[r][c] - shift) * kLog2e);
        row_sum[r] += weight;  // the softmax's denominator counts dropped weights too
        if constexpr (kDropout) {
          if (weight_dropped(args.rng, args.dropout_p, batch_head, query, n0 + tx + 16 * c, args.query_len,
                             args.key_len)) {
            weight = 0.0f;
          }
        }
        p_tile[(4 * ty + r) * Tiles::kScoreStride + tx + 16 * c] = weight;
      }
    }

    copy_async_wait_all();
    __syncthreads();  // V(n) and P are in; every thread is done with K(n)
    if (key_tile + 1 < key_tiles) {
      const int next = n0 + kTile;
      load_rows<kHeadDim>(k_tile, k_rows + next * args.k_strides.row, args.k_strides.row, args.key_len - next,
                          args.head_dim, args.vector_reads);
      copy_async_commit();
    }
    add_weighted_rows<kHeadDim>(acc, p_tile, v_tile, ty, tx);  // O += P V
  }

  // O = acc / (l (1 - p)) and lse = m + log l, row by row.
#pragma unroll
  for (int r = 0; r < 4; ++r) row_sum[r] = sum_over_row(row_sum[r]);
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int query = m0 + 4 * ty + r;
    if (query >= args.query_len) continue;
    const float total = row_sum[r];
    const float inverse = total > 0.0f ? args.output_factor / total : 0.0f;
    float* output_row = row_pointer(args.output, args.output_strides, b, h, query);
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      float values[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) values[e] = acc[r][g][e] * inverse;
      store_columns(output_row, 64 * g + 4 * tx, values, args.head_dim, args.vector_writes);
    }
    if (tx == 0) {
      args.log_sum_exp[static_cast<int64_t>(batch_head) * args.query_len + query] =
          total > 0.0f ? row_max[r] + logf(total) : -INFINITY;
    }
  }
}

// ---- backward: prepare (D, and grad_q zeroed) ----

// A warp a query row: D = dO . O, and the row of grad_q set to 0 for the atomics to add into.
__global__ void simt_prepare_kernel(const float* grad_output, HeadStrides grad_output_strides, const float* output,
                                    HeadStrides output_strides, float* grad_q, HeadStrides grad_q_strides, int heads,
                                    int query_len, int head_dim, int64_t rows, float* delta) {
  const int lane = threadIdx.x % 32;
  // NOTE: a warp's lanes share `row`, so the whole warp leaves the loop together and every
  // lane takes part in the shuffles.
  for (int64_t row = global_thread_index() / 32; row < rows; row += grid_stride() / 32) {
    const int64_t batch_head = row / query_len, query = row % query_len;
    const int64_t b = batch_head / heads, h = batch_head % heads;
    const float* grad_row = row_pointer(grad_output, grad_output_strides, b, h, query);
    const float* output_row = row_pointer(output, output_strides, b, h, query);
    float* grad_q_row = row_pointer(grad_q, grad_q_strides, b, h, query);
    float sum = 0.0f;
    for (int column = lane; column < head_dim; column += 32) {
      sum = fmaf(grad_row[column], output_row[column], sum);
      grad_q_row[column] = 0.0f;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) delta[row] = sum;
  }
}

// ---- backward: main ----

struct BackwardArgs {
  const float* q;            // (B, H, Tq, D)
  const float* k;            // (B, H, Tk, D)
  const float* v;            // (B, H, Tk, D)
  const float* grad_output;  // (B, H, Tq, D)
  const float* log_sum_exp;  // (B, H, Tq) contiguous
  const float* delta;        // (B, H, Tq) contiguous
  float* grad_q;             // (B, H, Tq, D), zeroed by the prepare kernel
  float* grad_k;             // (B, H, Tk, D)
  float* grad_v;             // (B, H, Tk, D)
  HeadStrides q_strides, k_strides, v_strides, grad_output_strides, grad_q_strides, grad_k_strides, grad_v_strides;
  int heads, query_len, key_len, head_dim;
  bool causal;
  bool vector_reads;   // every row of q, k, v and grad_output 16-byte aligned
  bool vector_writes;  // every row of grad_q, grad_k and grad_v 16-byte aligned
  float scale;
  float dropout_p;
  float dropout_factor;  // 1 / (1 - p)
  PhiloxState rng;
};

template <int kHeadDim, bool kDropout>
__global__ void __launch_bounds__(SimtTiles<kHeadDim>::kThreads, SimtTiles<kHeadDim>::kMinBlocks)
    simt_backward_kernel(BackwardArgs args) {
  using Tiles = SimtTiles<kHeadDim>;
  constexpr int kTile = Tiles::kTile, kGroups = Tiles::kColumnGroups, kScoreStride = Tiles::kScoreStride;
  extern __shared__ float4 shared_vectors[];
  float* k_tile = reinterpret_cast<float*>(shared_vectors);   // (64, kStride)
  float* v_tile = k_tile + Tiles::kOperandFloats;             // (64, kStride)
  float* q_tile = v_tile + Tiles::kOperandFloats;             // (64, kStride)
  float* grad_output_tile = q_tile + Tiles::kOperandFloats;   // (64, kStride)
  float* dropped_t = grad_output_tile + Tiles::kOperandFloats;  // (P o Z r)^T: (64 keys, kScoreStride)
  float* grad_scores_t = dropped_t + Tiles::kScoreFloats;       // dS^T, scale included: (64 keys, kScoreStride)

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int key_tiles = (args.key_len + kTile - 1) / kTile;
  const BlockTile place = block_tile(static_cast<int>(gridDim.x) / key_tiles);
  const int batch_head = place.batch_head, b = batch_head / args.heads, h = batch_head % args.heads;
  const int n0 = place.tile_rank * kTile;  // is_causal: rank 0, the first keys, has the most queries
  const int query_tiles = (args.query_len + kTile - 1) / kTile;
  const int first_query_tile = args.causal ? n0 / kTile : 0;
  const float* q_rows = row_pointer(args.q, args.q_strides, b, h, 0);
  const float* grad_output_rows = row_pointer(args.grad_output, args.grad_output_strides, b, h, 0);
  const float* lse_of_head = args.log_sum_exp + static_cast<int64_t>(batch_head) * args.query_len;
  const float* delta_of_head = args.delta + static_cast<int64_t>(batch_head) * args.query_len;
  auto load_query_tile = [&](int query_tile) {
    const int m0 = query_tile * kTile;
    load_rows<kHeadDim>(q_tile, q_rows + m0 * args.q_strides.row, args.q_strides.row, args.query_len - m0,
                        args.head_dim, args.vector_reads);
    load_rows<kHeadDim>(grad_output_tile, grad_output_rows + m0 * args.grad_output_strides.row,
                        args.grad_output_strides.row, args.query_len - m0, args.head_dim, args.vector_reads);
  };

  load_rows<kHeadDim>(k_tile, row_pointer(args.k, args.k_strides, b, h, n0), args.k_strides.row, args.key_len - n0,
                      args.head_dim, args.vector_reads);
  load_rows<kHeadDim>(v_tile, row_pointer(args.v, args.v_strides, b, h, n0), args.v_strides.row, args.key_len - n0,
                      args.head_dim, args.vector_reads);
  if (first_query_tile < query_tiles) load_query_tile(first_query_tile);
  copy_async_commit();

  // Keys 4 ty + r, columns 4 tx + 64 g.
  float grad_k_acc[4][kGroups][4] = {};
  float grad_v_acc[4][kGroups][4] = {};
  for (int query_tile = first_query_tile; query_tile < query_tiles; ++query_tile) {
    const int m0 = query_tile * kTile;
    copy_async_wait_all();
    __syncthreads();  // Q(m) and dO(m) are in; every thread is done with dS^T of m - 1

    // S = Q K^T and dP = dO V^T: queries 4 ty + r, keys tx + 16 c.
    float scores[4][4] = {}, grad_probs[4][4] = {};
    add_row_products<kHeadDim>(scores, q_tile, k_tile, ty, tx);
    add_row_products<kHeadDim>(grad_probs, grad_output_tile, v_tile, ty, tx);

    float lse[4], delta[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int query = m0 + 4 * ty + r;
      lse[r] = query < args.query_len ? lse_of_head[query] : 0.0f;
      delta[r] = query < args.query_len ? delta_of_head[query] : 0.0f;
    }
    const bool needs_mask = m0 + kTile > args.query_len || n0 + kTile > args.key_len ||
                            (args.causal && n0 + kTile - 1 > m0);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int key = n0 + tx + 16 * c;
      float dropped[4], grad_scores[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int query = m0 + 4 * ty + r;
        float prob = exp2f(fmaf(scores[r][c], args.scale, -lse[r]) * kLog2e);
        if (needs_mask && (query >= args.query_len || key >= args.key_len || (args.causal && key > query))) {
          prob = 0.0f;
        }
        float grad_prob = grad_probs[r][c];
        dropped[r] = prob;
        if constexpr (kDropout) {
          const bool keep = !weight_dropped(args.rng, args.dropout_p, batch_head, query, key, args.query_len,
                                            args.key_len);
          grad_prob = keep ? grad_prob * args.dropout_factor : 0.0f;
          dropped[r] = keep ? prob * args.dropout_factor : 0.0f;
        }
        grad_scores[r] = args.scale * prob * (grad_prob - delta[r]);
      }
      store_float4(dropped_t + (tx + 16 * c) * kScoreStride + 4 * ty, dropped);
      store_float4(grad_scores_t + (tx + 16 * c) * kScoreStride + 4 * ty, grad_scores);
    }
    __syncthreads();  // (P o Z r)^T and dS^T are in

    add_weighted_rows<kHeadDim>(grad_v_acc, dropped_t, grad_output_tile, ty, tx);  // dV += (P o Z r)^T dO
    add_weighted_rows<kHeadDim>(grad_k_acc, grad_scores_t, q_tile, ty, tx);        // dK += dS^T Q
    __syncthreads();  // every thread is done with Q(m) and dO(m)
    if (query_tile + 1 < query_tiles) {
      load_query_tile(query_tile + 1);
      copy_async_commit();
    }

    // dQ = dS K: queries 4 ty + r, columns 4 tx + 64 g; dS[4 ty + r][j] is dS^T[j][4 ty + r].
    // NOTE: one column group at a time, so that only 16 sums are live beside dK and dV.
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      float grad_q_acc[4][4] = {};
#pragma unroll 4
      for (int j = 0; j < kTile; ++j) {
        const Float4 grad_score = load_float4(grad_scores_t + j * kScoreStride + 4 * ty);
        const Float4 key_row = load_float4(k_tile + j * Tiles::kStride + 64 * g + 4 * tx);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
#pragma unroll
          for (int e = 0; e < 4; ++e) grad_q_acc[r][e] = fmaf(grad_score.value[r], key_row.value[e], grad_q_acc[r][e]);
        }
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int query = m0 + 4 * ty + r;
        if (query < args.query_len) {
          add_columns(row_pointer(args.grad_q, args.grad_q_strides, b, h, query), 64 * g + 4 * tx, grad_q_acc[r],
                      args.head_dim, args.vector_writes);
        }
      }
    }
  }
  copy_async_wait_all();  // a block with no query tile (is_causal) still issued K and V

  // dK and dV, each written once.
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int key = n0 + 4 * ty + r;
    if (key >= args.key_len) continue;
    float* grad_k_row = row_pointer(args.grad_k, args.grad_k_strides, b, h, key);
    float* grad_v_row = row_pointer(args.grad_v, args.grad_v_strides, b, h, key);
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      store_columns(grad_k_row, 64 * g + 4 * tx, grad_k_acc[r][g], args.head_dim, args.vector_writes);
      store_columns(grad_v_row, 64 * g + 4 * tx, grad_v_acc[r][g], args.head_dim, args.vector_writes);
    }
  }
}

// ---- host side ----

bool all_rows_aligned(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* tensor : tensors) {
    if (!rows_aligned_16(*tensor)) return false;
  }
  return true;
}

const float* float_data(const Tensor& tensor) { return static_cast<const float*>(tensor.raw_data()); }
float* mutable_float_data(const Tensor& tensor) { return static_cast<float*>(tensor.raw_data()); }

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

template <int kHeadDim, bool kDropout>
struct LaunchForward {
  static void run(const ForwardArgs& args, int64_t batch_heads, cudaStream_t stream) {
    using Tiles = SimtTiles<kHeadDim>;
    auto kernel = simt_forward_kernel<kHeadDim, kDropout>;
    allow_shared_memory(reinterpret_cast<const void*>(kernel), Tiles::kForwardSharedBytes);
    const dim3 grid = attention_grid((args.query_len + Tiles::kTile - 1) / Tiles::kTile, batch_heads);
    kernel<<<grid, Tiles::kThreads, Tiles::kForwardSharedBytes, stream>>>(args);
    MG_CUDA_CHECK_LAUNCH();
  }
};

template <int kHeadDim, bool kDropout>
struct LaunchBackward {
  static void run(const BackwardArgs& args, int64_t batch_heads, cudaStream_t stream) {
    using Tiles = SimtTiles<kHeadDim>;
    auto kernel = simt_backward_kernel<kHeadDim, kDropout>;
    allow_shared_memory(reinterpret_cast<const void*>(kernel), Tiles::kBackwardSharedBytes);
    const dim3 grid = attention_grid((args.key_len + Tiles::kTile - 1) / Tiles::kTile, batch_heads);
    kernel<<<grid, Tiles::kThreads, Tiles::kBackwardSharedBytes, stream>>>(args);
    MG_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

void simt_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                  const Tensor& output, const Tensor& log_sum_exp) {
  const int64_t batch = q.sizes()[0], heads = q.sizes()[1], head_dim = q.sizes()[3];
  const bool dropout = params.dropout_p > 0.0;
  const ForwardArgs args{float_data(q),
                         float_data(k),
                         float_data(v),
                         mutable_float_data(output),
                         mutable_float_data(log_sum_exp),
                         head_strides(q),
                         head_strides(k),
                         head_strides(v),
                         head_strides(output),
                         static_cast<int>(heads),
                         static_cast<int>(q.sizes()[2]),
                         static_cast<int>(k.sizes()[2]),
                         static_cast<int>(head_dim),
                         params.is_causal,
                         all_rows_aligned({&q, &k, &v}),
                         rows_aligned_16(output),
                         static_cast<float>(params.scale),
                         static_cast<float>(params.dropout_p),
                         dropout ? static_cast<float>(1.0 / (1.0 - params.dropout_p)) : 1.0f,
                         params.rng};
  launch_for<LaunchForward>(head_dim, dropout, args, batch * heads, current_stream(q.device()));
}

void simt_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                   const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  const int64_t batch = q.sizes()[0], heads = q.sizes()[1], query_len = q.sizes()[2], head_dim = q.sizes()[3];
  const int64_t rows = batch * heads * query_len;
  cudaStream_t stream = current_stream(q.device());
  // (B, H, Tq) D; freed on this stream once the kernels are queued (the caching allocator
  // orders its reuse).
  const Tensor delta =
      empty({attention_backward_workspace(q.dtype(), q.sizes()).elements()},
            {.dtype = kAttentionWorkspaceDType, .device = q.device(), .category = MemoryCategory::Workspace});
  const LaunchConfig prepare = launch_config(rows * 32);
  simt_prepare_kernel<<<prepare.blocks, prepare.threads, 0, stream>>>(
      float_data(grad_output), head_strides(grad_output), float_data(output), head_strides(output),
      mutable_float_data(grad_q), head_strides(grad_q), static_cast<int>(heads), static_cast<int>(query_len),
      static_cast<int>(head_dim), rows, mutable_float_data(delta));
  MG_CUDA_CHECK_LAUNCH();

  const bool dropout = params.dropout_p > 0.0;
  const BackwardArgs args{float_data(q),
                          float_data(k),
                          float_data(v),
                          float_data(grad_output),
                          float_data(log_sum_exp),
                          float_data(delta),
                          mutable_float_data(grad_q),
                          mutable_float_data(grad_k),
                          mutable_float_data(grad_v),
                          head_strides(q),
                          head_strides(k),
                          head_strides(v),
                          head_strides(grad_output),
                          head_strides(grad_q),
                          head_strides(grad_k),
                          head_strides(grad_v),
                          static_cast<int>(heads),
                          static_cast<int>(query_len),
                          static_cast<int>(k.sizes()[2]),
                          static_cast<int>(head_dim),
                          params.is_causal,
                          all_rows_aligned({&q, &k, &v, &grad_output}),
                          all_rows_aligned({&grad_q, &grad_k, &grad_v}),
                          static_cast<float>(params.scale),
                          static_cast<float>(params.dropout_p),
                          dropout ? static_cast<float>(1.0 / (1.0 - params.dropout_p)) : 1.0f,
                          params.rng};
  launch_for<LaunchBackward>(head_dim, dropout, args, batch * heads, stream);
}

}  // namespace mg::cuda::attention
