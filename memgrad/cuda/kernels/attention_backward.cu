// cuda/kernels/attention_backward.cu — the fused attention backward (FlashAttention-2) on
// tensor cores: grad_q, grad_k and grad_v from q, k, v, the forward's output and its
// log-sum-exp, recomputing the weights tile by tile.
//
// With P = softmax(scale q k^T) (row i's: exp(scale q_i.k_j - lse_i)), Z the dropout mask
// and r = 1 / (1 - p), the forward computed O = (P o Z r) V. Then
//   dV = (P o Z r)^T dO,   dP = (dO V^T) o Z r,   dS = P o (dP - D),
//   dQ = scale dS K,       dK = scale dS^T Q,
// where D_i = sum_j P_ij dP_ij = dO_i . O_i (one float per query row, computed first).
//
// Three kernels, in order:
//   prepare:  D = rowsum(dO o O) (float32) and zeros into the float32 dQ accumulator;
//   main:     a block of kWarps warps owns kBlockN = 16 kKeyTiles kWarps keys of one
//             (batch, head) (each warp 16 kKeyTiles of them) and walks the query tiles
//             (kBlockM rows) that attend to them, Q and dO tiles double-buffered by
//             cp.async (BackwardTiles: the configuration of each case). Per tile and warp:
//               S^T = K Q^T and dP^T = V dO^T (the warp's keys x kBlockM queries, registers),
//               P^T = exp2(S^T scale log2 e - lse log2 e), masked, with dropout as above,
//               dV += (P o Z r)^T dO and dK += dS^T Q (registers, fed from registers),
//               dS^T to shared memory (float16/bfloat16), then every warp takes 16 query
//               rows (and a share of the head dim) of dQ += dS K and adds them into the
//               accumulator with float32 atomics (after a barrier of its own, or pipelined:
//               after the next tile's barrier);
//             dK (times scale) and dV are written once at the end;
//   grad_q:   grad_q = scale x the accumulator, into grad_q's dtype and strides.
// The scratch, one float32 WORKSPACE tensor of B H Tq (D + 1) values (the accumulator,
// then D), is sized by cuda/plan/attention_workspace.h, which the memory predictor asks too.
//
// Deterministic (core/determinism.h): the accumulator has one slice per block of keys,
// zeroed first; each block adds into its own slice, where every element takes one value
// (so the atomics meet no other writer), and grad_q sums the slices in key order.
#include <cmath>

#include "memgrad/core/determinism.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/attention_tiles.cuh"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/plan/attention_workspace.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

using namespace attention;

// ---- prepare: D and a zeroed accumulator ----

// Sixteen lanes per query row, eight elements each (head dim <= 128).
constexpr int kPrepareLanesPerRow = 16;

template <class T>
__global__ void attention_prepare_kernel(const T* grad_output, HeadStrides grad_output_strides, const T* output,
                                         HeadStrides output_strides, int heads, int query_len, int head_dim,
                                         int64_t rows, float* grad_q_accumulator, float* delta) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kPrepareLanesPerRow;
  const int column = (threadIdx.x % kPrepareLanesPerRow) * 8;
  // Rows past the end still take part in the shuffles below.
  const bool valid = row < rows && column < head_dim;
  float sum = 0.0f;
  if (valid) {
    const int64_t batch_head = row / query_len, query = row % query_len;
    const int64_t b = batch_head / heads, h = batch_head % heads;
    const uint4 grad_bits = *reinterpret_cast<const uint4*>(row_pointer(grad_output, grad_output_strides, b, h, query) + column);
    const uint4 output_bits = *reinterpret_cast<const uint4*>(row_pointer(output, output_strides, b, h, query) + column);
    const uint32_t grad_words[4] = {grad_bits.x, grad_bits.y, grad_bits.z, grad_bits.w};
    const uint32_t output_words[4] = {output_bits.x, output_bits.y, output_bits.z, output_bits.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float2 g = unpack_pair<T>(grad_words[w]), o = unpack_pair<T>(output_words[w]);
      sum += g.x * o.x + g.y * o.y;
    }
    float4* accumulator = reinterpret_cast<float4*>(grad_q_accumulator + row * head_dim + column);
    accumulator[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    accumulator[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
#pragma unroll
  for (int offset = kPrepareLanesPerRow / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (valid && column == 0) delta[row] = sum;
}

// ---- main ----

template <class T>
struct BackwardArgs {
  const T* q;            // (B, H, Tq, D)
  const T* k;            // (B, H, Tk, D)
  const T* v;            // (B, H, Tk, D)
  const T* grad_output;  // (B, H, Tq, D)
  const float* log_sum_exp;  // (B, H, Tq)
  const float* delta;        // (B, H, Tq)
  float* grad_q_accumulator;  // (B, H, Tq, D) contiguous, one slice per key block when deterministic
  int64_t grad_q_slice_elements;  // B H Tq D when deterministic, else 0 (every block adds into slice 0)
  T* grad_k;  // (B, H, Tk, D)
  T* grad_v;  // (B, H, Tk, D)
  HeadStrides q_strides, k_strides, v_strides, grad_output_strides, grad_k_strides, grad_v_strides;
  int heads, query_len, key_len, head_dim;
  bool causal;
  float scale;
  float scale_log2;  // scale * log2(e)
  float dropout_p;
  float dropout_factor;  // 1 / (1 - p)
  PhiloxState rng;
};

// The one configuration of each case (head dim bucket, dropout; the same for float16 and
// bfloat16), measured on the H200 (docs/attention_kernels.md). 4 warps a block.
//   head dim <= 64 without dropout: each warp owns 32 keys (128 a block), query tiles of
//     32 rows, dQ pipelined. Each Q / dO fragment read from shared memory feeds four
//     products instead of two, the block adds half as many dQ atomics, and a tile costs one
//     barrier: dQ of query tile i is computed after the barrier that opens tile i + 1 (dS^T
//     double-buffered), so its atomics overlap the next tile's products. It needs 255
//     registers (dK and dV accumulators of 32 keys), without spills.
//   with dropout (Philox's registers) and at head dim 128 (twice the accumulators): each
//     warp owns 16 keys (64 a block), query tiles of 64 rows, dQ after a barrier of its own.
template <int kHeadDim, bool kDropout>
struct BackwardTiles {
  static constexpr bool kWideWarps = kHeadDim <= 64 && !kDropout;
  static constexpr int kWarps = 4;
  static constexpr int kKeyTiles = kWideWarps ? 2 : 1;  // 16-key tiles a warp
  static constexpr int kBlockM = kWideWarps ? 32 : 64;
  static constexpr bool kPipelinedGradQ = kWideWarps;
  static constexpr int kWarpKeys = 16 * kKeyTiles;
  static constexpr int kBlockN = kWarpKeys * kWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kGradScoreBuffers = kPipelinedGradQ ? 2 : 1;
  // K, V; Q and dO double-buffered; dS^T; lse and D double-buffered. At head dim 64:
  // 64.5 KiB (wide warps), 57 KiB (dropout); at 128: 105 KiB.
  static constexpr int kSharedBytes =
      (2 * kBlockN * kHeadDim + 4 * kBlockM * kHeadDim + kGradScoreBuffers * kBlockN * kBlockM) * 2 + 4 * kBlockM * 4;
};
// The workspace plan's key block (a deterministic backward's dQ slices) is this kBlockN.
static_assert(BackwardTiles<64, false>::kBlockN == 128 && BackwardTiles<64, true>::kBlockN == 64 &&
              BackwardTiles<128, false>::kBlockN == 64 && BackwardTiles<128, true>::kBlockN == 64);

template <class T, int kHeadDim, bool kDropout>
__global__ void __launch_bounds__(BackwardTiles<kHeadDim, kDropout>::kThreads)
    attention_backward_kernel(BackwardArgs<T> args) {
  using Tiles = BackwardTiles<kHeadDim, kDropout>;
  constexpr int kKeyTiles = Tiles::kKeyTiles, kBlockM = Tiles::kBlockM, kBlockN = Tiles::kBlockN;
  constexpr int kThreads = Tiles::kThreads;
  constexpr int kDimTiles = kHeadDim / 8;
  constexpr int kHeadSteps = kHeadDim / 16;  // k16 steps of the products over the head dim
  constexpr int kQueryTiles = kBlockM / 8;
  // The dQ product: kBlockM / 16 row groups of 16 queries, the head dim split kDimSplits ways.
  constexpr int kQueryGroups = kBlockM / 16;
  static_assert(Tiles::kWarps % kQueryGroups == 0, "every warp takes one share of dQ");
  constexpr int kDimSplits = Tiles::kWarps / kQueryGroups;
  constexpr int kSplitDimTiles = kDimTiles / kDimSplits;
  static_assert(kSplitDimTiles % 2 == 0, "dQ's n8 tiles come in pairs per ldmatrix");

  extern __shared__ __align__(128) unsigned char shared_bytes[];
  T* k_tile = reinterpret_cast<T*>(shared_bytes);     // (kBlockN, kHeadDim)
  T* v_tile = k_tile + kBlockN * kHeadDim;            // (kBlockN, kHeadDim)
  T* q_tiles = v_tile + kBlockN * kHeadDim;           // 2 x (kBlockM, kHeadDim)
  T* grad_output_tiles = q_tiles + 2 * kBlockM * kHeadDim;  // 2 x (kBlockM, kHeadDim)
  T* grad_scores = grad_output_tiles + 2 * kBlockM * kHeadDim;  // kGradScoreBuffers x dS^T (kBlockN, kBlockM)
  float* lse_rows = reinterpret_cast<float*>(grad_scores + Tiles::kGradScoreBuffers * kBlockN * kBlockM);  // 2 x kBlockM
  float* delta_rows = lse_rows + 2 * kBlockM;  // 2 x kBlockM

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  const int tiles = (args.key_len + kBlockN - 1) / kBlockN;
  const BlockTile place = block_tile(static_cast<int>(gridDim.x) / tiles);
  const int batch_head = place.batch_head;
  const int b = batch_head / args.heads, h = batch_head % args.heads;
  const int n0 = place.tile_rank * kBlockN;  // is_causal: rank 0, the first keys, has the most queries
  const int warp_key = warp * Tiles::kWarpKeys;  // the warp's first key in the tile
  const int query_blocks = (args.query_len + kBlockM - 1) / kBlockM;
  const int first_query_block = args.causal ? n0 / kBlockM : 0;

  const T* q_rows = row_pointer(args.q, args.q_strides, b, h, 0);
  const T* grad_output_rows = row_pointer(args.grad_output, args.grad_output_strides, b, h, 0);
  const float* lse_of_head = args.log_sum_exp + static_cast<int64_t>(batch_head) * args.query_len;
  const float* delta_of_head = args.delta + static_cast<int64_t>(batch_head) * args.query_len;
  // Issues the copies of query tile `query_block` into buffer `buffer`.
  auto load_query_block = [&](int query_block, int buffer) {
    const int m0 = query_block * kBlockM;
    load_tile<kBlockM, kHeadDim, kThreads>(q_tiles + buffer * kBlockM * kHeadDim, q_rows + m0 * args.q_strides.row,
                                           args.q_strides.row, args.query_len - m0, args.head_dim);
    load_tile<kBlockM, kHeadDim, kThreads>(grad_output_tiles + buffer * kBlockM * kHeadDim,
                                           grad_output_rows + m0 * args.grad_output_strides.row,
                                           args.grad_output_strides.row, args.query_len - m0, args.head_dim);
    for (int i = threadIdx.x; i < kBlockM; i += kThreads) {
      const bool valid = m0 + i < args.query_len;
      copy_async_4(shared_address(lse_rows + buffer * kBlockM + i), valid ? lse_of_head + m0 + i : lse_of_head, valid);
      copy_async_4(shared_address(delta_rows + buffer * kBlockM + i), valid ? delta_of_head + m0 + i : delta_of_head,
                   valid);
    }
  };

  // dQ (16 queries x kSplitDimTiles n8 tiles of this warp) += dS K for the query tile at m0,
  // whose dS^T every warp has written to `grad_scores_tile`, added into the accumulator.
  auto add_grad_q = [&](int m0, const T* grad_scores_tile) {
    const int query_group = warp % kQueryGroups, dim_split = warp / kQueryGroups;
    float grad_q_acc[kSplitDimTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a_fragment[4];
      load_matrix_x4_transposed<kBlockM>(a_fragment, grad_scores_tile, 16 * kk + pattern_y_row(lane),
                                         2 * query_group + pattern_y_chunk(lane));
#pragma unroll
      for (int dd = 0; dd < kSplitDimTiles / 2; ++dd) {
        uint32_t b_fragments[4];
        load_matrix_x4_transposed<kHeadDim>(b_fragments, k_tile, 16 * kk + pattern_x_row(lane),
                                            dim_split * kSplitDimTiles + 2 * dd + pattern_x_chunk(lane));
        mma_16x8x16<T>(grad_q_acc[2 * dd], a_fragment, b_fragments[0], b_fragments[1]);
        mma_16x8x16<T>(grad_q_acc[2 * dd + 1], a_fragment, b_fragments[2], b_fragments[3]);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int query = m0 + 16 * query_group + group + 8 * r;
      if (query >= args.query_len) continue;
      float* accumulator_row = args.grad_q_accumulator + place.tile_rank * args.grad_q_slice_elements +
                               (static_cast<int64_t>(batch_head) * args.query_len + query) * args.head_dim;
#pragma unroll
      for (int dt = 0; dt < kSplitDimTiles; ++dt) {
        const int column = (dim_split * kSplitDimTiles + dt) * 8 + 2 * quad;
        if (column < args.head_dim) {
          atomicAdd(reinterpret_cast<float2*>(accumulator_row + column),
                    make_float2(grad_q_acc[dt][2 * r], grad_q_acc[dt][2 * r + 1]));
        }
      }
    }
  };

  load_tile<kBlockN, kHeadDim, kThreads>(k_tile, row_pointer(args.k, args.k_strides, b, h, n0), args.k_strides.row,
                                         args.key_len - n0, args.head_dim);
  load_tile<kBlockN, kHeadDim, kThreads>(v_tile, row_pointer(args.v, args.v_strides, b, h, n0), args.v_strides.row,
                                         args.key_len - n0, args.head_dim);
  if (first_query_block < query_blocks) load_query_block(first_query_block, 0);
  copy_async_commit();

  float grad_k_acc[kKeyTiles][kDimTiles][4] = {};
  float grad_v_acc[kKeyTiles][kDimTiles][4] = {};
  for (int query_block = first_query_block; query_block < query_blocks; ++query_block) {
    const int step = query_block - first_query_block;
    const int buffer = step & 1;
    const int m0 = query_block * kBlockM;
    copy_async_wait_all();
    // This tile is in; every warp is done with the other buffer, and (pipelined) has
    // written the previous tile's dS^T.
    __syncthreads();
    if (query_block + 1 < query_blocks) {
      load_query_block(query_block + 1, buffer ^ 1);
      copy_async_commit();
    }
    if constexpr (Tiles::kPipelinedGradQ) {
      if (step > 0) add_grad_q(m0 - kBlockM, grad_scores + (buffer ^ 1) * kBlockN * kBlockM);
    }
    const T* q_tile = q_tiles + buffer * kBlockM * kHeadDim;
    const T* grad_output_tile = grad_output_tiles + buffer * kBlockM * kHeadDim;
    const float* lse = lse_rows + buffer * kBlockM;
    const float* delta = delta_rows + buffer * kBlockM;

    // S^T = K Q^T and dP^T = V dO^T for the warp's keys; each Q, dO fragment serves every
    // key tile of the warp.
    float scores[kKeyTiles][kQueryTiles][4] = {};
    float grad_probs[kKeyTiles][kQueryTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadSteps; ++kk) {
      uint32_t k_fragments[kKeyTiles][4], v_fragments[kKeyTiles][4];
#pragma unroll
      for (int kt = 0; kt < kKeyTiles; ++kt) {
        const int row = warp_key + 16 * kt + pattern_x_row(lane), chunk = 2 * kk + pattern_x_chunk(lane);
        load_matrix_x4<kHeadDim>(k_fragments[kt], k_tile, row, chunk);
        load_matrix_x4<kHeadDim>(v_fragments[kt], v_tile, row, chunk);
      }
#pragma unroll
      for (int nn = 0; nn < kBlockM / 16; ++nn) {
        uint32_t b_fragments[4];
        load_matrix_x4<kHeadDim>(b_fragments, q_tile, 16 * nn + pattern_y_row(lane), 2 * kk + pattern_y_chunk(lane));
#pragma unroll
        for (int kt = 0; kt < kKeyTiles; ++kt) {
          mma_16x8x16<T>(scores[kt][2 * nn], k_fragments[kt], b_fragments[0], b_fragments[1]);
          mma_16x8x16<T>(scores[kt][2 * nn + 1], k_fragments[kt], b_fragments[2], b_fragments[3]);
        }
        load_matrix_x4<kHeadDim>(b_fragments, grad_output_tile, 16 * nn + pattern_y_row(lane),
                                 2 * kk + pattern_y_chunk(lane));
#pragma unroll
        for (int kt = 0; kt < kKeyTiles; ++kt) {
          mma_16x8x16<T>(grad_probs[kt][2 * nn], v_fragments[kt], b_fragments[0], b_fragments[1]);
          mma_16x8x16<T>(grad_probs[kt][2 * nn + 1], v_fragments[kt], b_fragments[2], b_fragments[3]);
        }
      }
    }

    // P^T, then dS^T into `scores` and the dropped P^T (what multiplied V) into `grad_probs`.
    const bool needs_mask = m0 + kBlockM > args.query_len || n0 + kBlockN > args.key_len ||
                            (args.causal && n0 + kBlockN - 1 > m0);
#pragma unroll
    for (int kt = 0; kt < kKeyTiles; ++kt) {
#pragma unroll
      for (int t = 0; t < kQueryTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int query_in_tile = 8 * t + 2 * quad + (e & 1);
          const int key = n0 + warp_key + 16 * kt + group + 8 * (e >> 1);
          const int query = m0 + query_in_tile;
          float prob = exp2f(scores[kt][t][e] * args.scale_log2 - lse[query_in_tile] * kLog2e);
          if (needs_mask && (query >= args.query_len || key >= args.key_len || (args.causal && key > query))) {
            prob = 0.0f;
          }
          float grad_prob = grad_probs[kt][t][e];
          float dropped_prob = prob;
          if constexpr (kDropout) {
            const bool keep = !weight_dropped(args.rng, args.dropout_p, batch_head, query, key, args.query_len,
                                              args.key_len);
            grad_prob = keep ? grad_prob * args.dropout_factor : 0.0f;
            dropped_prob = keep ? prob * args.dropout_factor : 0.0f;
          }
          scores[kt][t][e] = prob * (grad_prob - delta[query_in_tile]);
          grad_probs[kt][t][e] = dropped_prob;
        }
      }
    }

    // dV += (P o Z r)^T dO and dK += dS^T Q (unscaled; scale is applied once at the end);
    // each dO, Q fragment serves every key tile of the warp.
#pragma unroll
    for (int kk = 0; kk < kBlockM / 16; ++kk) {
      uint32_t dropped_fragments[kKeyTiles][4], grad_scores_fragments[kKeyTiles][4];
#pragma unroll
      for (int kt = 0; kt < kKeyTiles; ++kt) {
        accumulators_to_a<T>(dropped_fragments[kt], grad_probs[kt][2 * kk], grad_probs[kt][2 * kk + 1]);
        accumulators_to_a<T>(grad_scores_fragments[kt], scores[kt][2 * kk], scores[kt][2 * kk + 1]);
      }
#pragma unroll
      for (int dd = 0; dd < kHeadSteps; ++dd) {
        uint32_t b_fragments[4];
        load_matrix_x4_transposed<kHeadDim>(b_fragments, grad_output_tile, 16 * kk + pattern_x_row(lane),
                                            2 * dd + pattern_x_chunk(lane));
#pragma unroll
        for (int kt = 0; kt < kKeyTiles; ++kt) {
          mma_16x8x16<T>(grad_v_acc[kt][2 * dd], dropped_fragments[kt], b_fragments[0], b_fragments[1]);
          mma_16x8x16<T>(grad_v_acc[kt][2 * dd + 1], dropped_fragments[kt], b_fragments[2], b_fragments[3]);
        }
        load_matrix_x4_transposed<kHeadDim>(b_fragments, q_tile, 16 * kk + pattern_x_row(lane),
                                            2 * dd + pattern_x_chunk(lane));
#pragma unroll
        for (int kt = 0; kt < kKeyTiles; ++kt) {
          mma_16x8x16<T>(grad_k_acc[kt][2 * dd], grad_scores_fragments[kt], b_fragments[0], b_fragments[1]);
          mma_16x8x16<T>(grad_k_acc[kt][2 * dd + 1], grad_scores_fragments[kt], b_fragments[2], b_fragments[3]);
        }
      }
    }

    // dS^T to shared memory for dQ, which needs every warp's keys.
    T* grad_scores_tile = grad_scores + (Tiles::kPipelinedGradQ ? buffer : 0) * kBlockN * kBlockM;
#pragma unroll
    for (int kt = 0; kt < kKeyTiles; ++kt) {
#pragma unroll
      for (int t = 0; t < kQueryTiles; ++t) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          *reinterpret_cast<uint32_t*>(grad_scores_tile +
                                       swizzled<kBlockM>(warp_key + 16 * kt + group + 8 * r, 8 * t + 2 * quad)) =
              pack_pair<T>(scores[kt][t][2 * r], scores[kt][t][2 * r + 1]);
        }
      }
    }
    if constexpr (!Tiles::kPipelinedGradQ) {
      __syncthreads();
      add_grad_q(m0, grad_scores_tile);
    }
  }
  if constexpr (Tiles::kPipelinedGradQ) {
    if (query_blocks > first_query_block) {  // the last tile's dQ
      __syncthreads();
      const int last_step = query_blocks - 1 - first_query_block;
      add_grad_q((query_blocks - 1) * kBlockM, grad_scores + (last_step & 1) * kBlockN * kBlockM);
    }
  }
  copy_async_wait_all();  // a block with no query tile (is_causal) still issued K and V

  // dK = scale dS^T Q and dV, each written once.
#pragma unroll
  for (int kt = 0; kt < kKeyTiles; ++kt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = n0 + warp_key + 16 * kt + group + 8 * r;
      if (key >= args.key_len) continue;
      T* grad_k_row = row_pointer(args.grad_k, args.grad_k_strides, b, h, key);
      T* grad_v_row = row_pointer(args.grad_v, args.grad_v_strides, b, h, key);
#pragma unroll
      for (int dt = 0; dt < kDimTiles; ++dt) {
        const int column = 8 * dt + 2 * quad;
        if (column < args.head_dim) {
          *reinterpret_cast<uint32_t*>(grad_k_row + column) =
              pack_pair<T>(grad_k_acc[kt][dt][2 * r] * args.scale, grad_k_acc[kt][dt][2 * r + 1] * args.scale);
          *reinterpret_cast<uint32_t*>(grad_v_row + column) =
              pack_pair<T>(grad_v_acc[kt][dt][2 * r], grad_v_acc[kt][dt][2 * r + 1]);
        }
      }
    }
  }
}

// ---- grad_q: scale x the accumulator (its slices summed in order), in grad_q's dtype and strides ----

template <class T>
__global__ void attention_grad_q_kernel(const float* grad_q_accumulator, int slices, int64_t slice_elements,
                                        int64_t rows, int heads, int query_len, int head_dim, float scale, T* grad_q,
                                        HeadStrides grad_q_strides) {
  const int chunks_per_row = head_dim / 8;
  const int64_t chunks = rows * chunks_per_row;
  for (int64_t chunk_index = global_thread_index(); chunk_index < chunks; chunk_index += grid_stride()) {
    const int64_t row = chunk_index / chunks_per_row;
    const int column = static_cast<int>(chunk_index - row * chunks_per_row) * 8;
    const int64_t batch_head = row / query_len, query = row % query_len;
    const float4* source = reinterpret_cast<const float4*>(grad_q_accumulator + row * head_dim + column);
    float4 low = source[0], high = source[1];
    for (int slice = 1; slice < slices; ++slice) {
      const float4* more = source + slice * slice_elements / 4;
      const float4 more_low = more[0], more_high = more[1];
      low = make_float4(low.x + more_low.x, low.y + more_low.y, low.z + more_low.z, low.w + more_low.w);
      high = make_float4(high.x + more_high.x, high.y + more_high.y, high.z + more_high.z, high.w + more_high.w);
    }
    uint4 packed;
    packed.x = pack_pair<T>(low.x * scale, low.y * scale);
    packed.y = pack_pair<T>(low.z * scale, low.w * scale);
    packed.z = pack_pair<T>(high.x * scale, high.y * scale);
    packed.w = pack_pair<T>(high.z * scale, high.w * scale);
    *reinterpret_cast<uint4*>(row_pointer(grad_q, grad_q_strides, batch_head / heads, batch_head % heads, query) +
                              column) = packed;
  }
}

template <class T, int kHeadDim, bool kDropout>
void launch_backward(const BackwardArgs<T>& args, int64_t batch_heads, cudaStream_t stream) {
  using Tiles = BackwardTiles<kHeadDim, kDropout>;
  auto kernel = attention_backward_kernel<T, kHeadDim, kDropout>;
  allow_shared_memory(reinterpret_cast<const void*>(kernel), Tiles::kSharedBytes);
  const dim3 grid = attention_grid((args.key_len + Tiles::kBlockN - 1) / Tiles::kBlockN, batch_heads);
  kernel<<<grid, Tiles::kThreads, Tiles::kSharedBytes, stream>>>(args);
  MG_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention::tensor_core_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                                     const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  const int64_t batch = q.sizes()[0], heads = q.sizes()[1], query_len = q.sizes()[2], head_dim = q.sizes()[3];
  const int64_t key_len = k.sizes()[2];
  const int64_t rows = batch * heads * query_len;
  Device device = q.device();
  cudaStream_t stream = current_stream(device);
  const Tensor q_in = aligned_operand(q), k_in = aligned_operand(k), v_in = aligned_operand(v);
  const Tensor grad_output_in = aligned_operand(grad_output), output_in = aligned_operand(output);
  const Tensor grad_q_out = aligned_result(grad_q), grad_k_out = aligned_result(grad_k),
               grad_v_out = aligned_result(grad_v);
  // (B, H, Tq, D) dQ accumulator, then (B, H, Tq) D; freed on this stream once the kernels
  // are queued (the caching allocator orders its reuse).
  const bool dropout = params.dropout_p > 0.0, deterministic = deterministic_algorithms();
  const AttentionBackwardWorkspace workspace_sizes =
      attention_backward_workspace(q.dtype(), q.sizes(), key_len, dropout, deterministic);
  Tensor workspace =
      empty({workspace_sizes.elements()},
            {.dtype = kAttentionWorkspaceDType, .device = device, .category = MemoryCategory::Workspace});
  float* grad_q_accumulator = static_cast<float*>(workspace.raw_data());
  float* delta = grad_q_accumulator + workspace_sizes.grad_q_accumulator;
  const int64_t slice_elements = rows * head_dim;
  // The prepare kernel zeroes slice 0; a deterministic backward's other slices start at 0 too.
  if (workspace_sizes.grad_q_slices > 1) {
    MG_CUDA_CHECK(cudaMemsetAsync(grad_q_accumulator + slice_elements, 0,
                                  (workspace_sizes.grad_q_slices - 1) * slice_elements * sizeof(float), stream));
  }
  dispatch_floating(q.dtype(), "scaled_dot_product_attention backward", [&]<class Element>() {
    if constexpr (std::is_same_v<Element, Half> || std::is_same_v<Element, BFloat16>) {
      using T = device_t<Element>;
      const int64_t prepare_threads = rows * kPrepareLanesPerRow;
      const unsigned prepare_blocks = static_cast<unsigned>((prepare_threads + kThreadsPerBlock - 1) / kThreadsPerBlock);
      attention_prepare_kernel<T><<<prepare_blocks, kThreadsPerBlock, 0, stream>>>(
          device_data<Element>(grad_output_in), head_strides(grad_output_in), device_data<Element>(output_in),
          head_strides(output_in), static_cast<int>(heads), static_cast<int>(query_len), static_cast<int>(head_dim),
          rows, grad_q_accumulator, delta);
      MG_CUDA_CHECK_LAUNCH();

      const BackwardArgs<T> args{device_data<Element>(q_in),
                                 device_data<Element>(k_in),
                                 device_data<Element>(v_in),
                                 device_data<Element>(grad_output_in),
                                 static_cast<const float*>(log_sum_exp.raw_data()),
                                 delta,
                                 grad_q_accumulator,
                                 deterministic ? slice_elements : 0,
                                 device_data<Element>(grad_k_out),
                                 device_data<Element>(grad_v_out),
                                 head_strides(q_in),
                                 head_strides(k_in),
                                 head_strides(v_in),
                                 head_strides(grad_output_in),
                                 head_strides(grad_k_out),
                                 head_strides(grad_v_out),
                                 static_cast<int>(heads),
                                 static_cast<int>(query_len),
                                 static_cast<int>(key_len),
                                 static_cast<int>(head_dim),
                                 params.is_causal,
                                 static_cast<float>(params.scale),
                                 static_cast<float>(params.scale * static_cast<double>(kLog2e)),
                                 static_cast<float>(params.dropout_p),
                                 dropout ? static_cast<float>(1.0 / (1.0 - params.dropout_p)) : 1.0f,
                                 params.rng};
      const int64_t batch_heads = batch * heads;
      auto launch = [&]<int kHeadDim>() {
        if (dropout) launch_backward<T, kHeadDim, true>(args, batch_heads, stream);
        else launch_backward<T, kHeadDim, false>(args, batch_heads, stream);
      };
      if (head_dim <= 64) launch.template operator()<64>();
      else launch.template operator()<128>();

      LaunchConfig config = launch_config(rows * (head_dim / 8));
      attention_grad_q_kernel<T><<<config.blocks, config.threads, 0, stream>>>(
          grad_q_accumulator, static_cast<int>(workspace_sizes.grad_q_slices), slice_elements, rows,
          static_cast<int>(heads), static_cast<int>(query_len), static_cast<int>(head_dim),
          static_cast<float>(params.scale), device_data<Element>(grad_q_out), head_strides(grad_q_out));
      MG_CUDA_CHECK_LAUNCH();
    }
  });
  finish_aligned_result(grad_q_out, grad_q);
  finish_aligned_result(grad_k_out, grad_k);
  finish_aligned_result(grad_v_out, grad_v);
}

}  // namespace mg::cuda
