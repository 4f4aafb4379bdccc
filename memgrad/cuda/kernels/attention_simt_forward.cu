// cuda/kernels/attention_simt_forward.cu — the fused attention forward (FlashAttention-2)
// for float32 on the FP32 FMA units: no tensor cores and no TF32, so every product is as
// exact as PyTorch's float32 default (whose memory-efficient kernel is SIMT too). The
// contract is core/kernels.h's; any head dim in [1, 128] and any row strides are read in
// place. The block's layout and what the backward shares: attention_simt_tiles.cuh.
//
// A block per 64 query rows of one (batch, head), walking the key tiles (the ones
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
#include <cmath>

#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/attention_simt_tiles.cuh"
#include "memgrad/cuda/kernels/attention_tiles.cuh"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda::attention {

namespace {

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

}  // namespace mg::cuda::attention
