// cuda/kernels/attention_forward.cu — the fused attention forward (FlashAttention-2) on
// tensor cores: output = softmax(scale * q k^T, causal mask, dropout) v and the float32
// log-sum-exp of each query row, without ever materialising the (Tq, Tk) matrix.
//
// A block of kWarps warps owns kBlockM = 16 kWarps query rows of one (batch, head); each
// warp owns 16 of them, whose Q fragments it keeps in registers. The block walks the key
// tiles (kBlockN keys) in order, each K and V tile staged in shared memory by cp.async in
// one of two buffers: tile n + 1 is copied while tile n is computed, so one barrier a tile
// (at its start) both publishes tile n and frees the buffer of tile n - 1. Per warp:
//   S = Q K^T (16 x kBlockN, float32 accumulators), masked (keys past Tk; with is_causal,
//     keys j > i; only the tiles that reach past Tk or the diagonal do the arithmetic);
//   online softmax: the running maximum m of each row (log2 domain: the scale times
//     log2(e), folded into the exponential's argument as one fused multiply-add) and the
//     per-lane partial sum l; when m grows, l and the output accumulators are rescaled by
//     exp2(m_old - m_new);
//   P = exp2(scale_log2 S - m), summed into l before dropout (the softmax's denominator is over all
//     keys), then dropped (kept weights are not rescaled here: 1 / (1 - p) is folded into
//     the final division) and fed as float16/bfloat16 A fragments straight from registers
//     into O += P V.
// Key tiles entirely above the diagonal are never visited (is_causal). At the end
// O = acc / (l (1 - p)) goes through shared memory (the warp's own Q rows) to 16-byte
// stores, and lse = (m + log2 l) ln 2 in natural-log units, as core/kernels.h states.
//
// Dropout keeps weight (b, h, i, j) as the contract says: one Philox block per element,
// index ((b H + h) Tq + i) Tk + j, so the mask is the math path's.
#include <algorithm>
#include <cmath>
#include <limits>

#include "memgrad/core/random.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/attention_tiles.cuh"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

using namespace attention;

template <class T>
struct ForwardArgs {
  const T* q;  // (B, H, Tq, D)
  const T* k;  // (B, H, Tk, D)
  const T* v;  // (B, H, Tk, D)
  T* output;   // (B, H, Tq, D)
  float* log_sum_exp;  // (B, H, Tq) contiguous
  HeadStrides q_strides, k_strides, v_strides, output_strides;
  int heads, query_len, key_len, head_dim;
  bool causal;
  // |scale| log2(e), at least FLT_MIN: raw scores s (masked ones -inf) go into exp2 as
  // fma(s, scale_log2, -m). NOTE: a scale of 0 becomes FLT_MIN, so -inf * scale_log2 stays
  // -inf instead of NaN while every unmasked fma still rounds to -m (uniform weights).
  float scale_log2;
  bool negate_scores;    // scale < 0: the Q fragments' signs are flipped (exact) instead
  float dropout_p;       // compared with the uniform as float(p), as the contract says
  float output_factor;   // 1 / (1 - p)
  PhiloxState rng;
};

// The one configuration of each case (head dim bucket, dropout; the same for float16 and
// bfloat16), measured on the H200 (docs/attention_kernels.md). Warps own 16 query rows.
//   head dim <= 64 without dropout: 8 warps (128 rows a block), 2 blocks an SM, so at most
//     128 registers and 16 warps an SM to overlap the exponentials with the products, and
//     each K / V tile staged in shared memory serves 128 rows; 64-key tiles;
//   with dropout (Philox's registers would spill under 128) and at head dim 128 (twice the
//     accumulators): 4 warps (64 rows), 64-key tiles, no register cap.
// K and V have two buffers each (shared memory is never the limit on blocks an SM).
template <int kHeadDim, bool kDropout>
struct ForwardTiles {
  static constexpr bool kEightWarps = kHeadDim <= 64 && !kDropout;
  static constexpr int kWarps = kEightWarps ? 8 : 4;
  // The blocks an SM must hold at once: the launch bound caps the registers at
  // 64K / (kMinBlocks x kThreads).
  static constexpr int kMinBlocks = kEightWarps ? 2 : 1;
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kBlockN = 64;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSharedBytes = (kBlockM + 2 * 2 * kBlockN) * kHeadDim * 2;
};

// 2^x by the special-function unit alone. NOTE: exp2f's ex2.approx.f32 also handles
// arguments below -126 (whose results are denormal) with a compare and two multiplies
// around it, three more instructions per score; the flushed results are below 2^-126 of
// the row's largest weight, nothing to a softmax.
__device__ __forceinline__ float exp2_flush(float x) {
  float result;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(result) : "f"(x));
  return result;
}

// Which query rows of which (batch, head) a block owns.
struct ForwardPlace {
  int batch_head, b, h;
  int m0;  // the first query row
};
template <int kBlockM, class T>
__device__ __forceinline__ ForwardPlace forward_place(const ForwardArgs<T>& args) {
  const int tiles = (args.query_len + kBlockM - 1) / kBlockM;
  const BlockTile tile = block_tile(static_cast<int>(gridDim.x) / tiles);
  // NOTE: rank 0 is the last query tile, the one with the most keys (is_causal).
  return {tile.batch_head, tile.batch_head / args.heads, tile.batch_head % args.heads,
          (tiles - 1 - tile.tile_rank) * kBlockM};
}

template <class T, int kHeadDim, bool kDropout>
__global__ void __launch_bounds__(ForwardTiles<kHeadDim, kDropout>::kThreads,
                                  ForwardTiles<kHeadDim, kDropout>::kMinBlocks)
    attention_forward_kernel(ForwardArgs<T> args) {
  using Tiles = ForwardTiles<kHeadDim, kDropout>;
  constexpr int kBlockM = Tiles::kBlockM, kBlockN = Tiles::kBlockN;
  constexpr int kThreads = Tiles::kThreads;
  constexpr int kDimTiles = kHeadDim / 8;   // n8 tiles of the output
  constexpr int kKeyTiles = kBlockN / 8;    // n8 tiles of S
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  T* q_tile = reinterpret_cast<T*>(shared_bytes);  // (kBlockM, kHeadDim), later the output's staging
  T* k_tiles = q_tile + kBlockM * kHeadDim;        // 2 x (kBlockN, kHeadDim): tile n in buffer n % 2
  T* v_tiles = k_tiles + 2 * kBlockN * kHeadDim;   // 2 x (kBlockN, kHeadDim)

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;  // accumulator rows group, group + 8; columns 2 quad, +1
  const ForwardPlace place = forward_place<kBlockM>(args);
  const int batch_head = place.batch_head, b = place.b, h = place.h, m0 = place.m0;
  const int key_end = args.causal ? min(args.key_len, m0 + kBlockM) : args.key_len;
  const int key_blocks = (key_end + kBlockN - 1) / kBlockN;

  const T* k_rows = row_pointer(args.k, args.k_strides, b, h, 0);
  const T* v_rows = row_pointer(args.v, args.v_strides, b, h, 0);
  load_tile<kBlockM, kHeadDim, kThreads>(q_tile, row_pointer(args.q, args.q_strides, b, h, m0), args.q_strides.row,
                                         args.query_len - m0, args.head_dim);
  load_tile<kBlockN, kHeadDim, kThreads>(k_tiles, k_rows, args.k_strides.row, args.key_len, args.head_dim);
  load_tile<kBlockN, kHeadDim, kThreads>(v_tiles, v_rows, args.v_strides.row, args.key_len, args.head_dim);
  copy_async_commit();

  // For the warp's rows warp_row + group (r = 0) and + 8 (r = 1):
  float acc[kDimTiles][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY};  // log2 domain (scale_log2 x the raw maximum)
  float row_sum[2] = {0.0f, 0.0f};  // this lane's columns only, summed over the quad at the end
  uint32_t q_fragments[kHeadDim / 16][4];
  const int warp_row = warp * 16;  // the warp's first row in the tile

  copy_async_wait_all();
  __syncthreads();  // Q, K(0) and V(0) are in
  // A negative scale: S = (-Q) K^T times |scale|, so the raw maximum stays the maximum.
  const uint32_t sign_flip = args.negate_scores ? 0x80008000u : 0u;  // both 16-bit halves
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    load_matrix_x4<kHeadDim>(q_fragments[kk], q_tile, warp_row + pattern_x_row(lane), 2 * kk + pattern_x_chunk(lane));
#pragma unroll
    for (int i = 0; i < 4; ++i) q_fragments[kk][i] ^= sign_flip;
  }

  for (int key_block = 0; key_block < key_blocks; ++key_block) {
    const int n0 = key_block * kBlockN;
    const int buffer_row = (key_block % 2) * kBlockN;  // the tile's first row in k_tiles, v_tiles
    if (key_block > 0) {
      copy_async_wait_all();
      __syncthreads();  // K(n) and V(n) are in; every warp is done with tile n - 1, whose buffers come next
    }
    if (key_block + 1 < key_blocks) {
      const int next = n0 + kBlockN;
      const int next_buffer = ((key_block + 1) % 2) * kBlockN * kHeadDim;
      load_tile<kBlockN, kHeadDim, kThreads>(k_tiles + next_buffer, k_rows + next * args.k_strides.row,
                                             args.k_strides.row, args.key_len - next, args.head_dim);
      load_tile<kBlockN, kHeadDim, kThreads>(v_tiles + next_buffer, v_rows + next * args.v_strides.row,
                                             args.v_strides.row, args.key_len - next, args.head_dim);
      copy_async_commit();
    }

    // S = Q K^T for the warp's rows.
    float scores[kKeyTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
      for (int nn = 0; nn < kBlockN / 16; ++nn) {
        uint32_t b_fragments[4];
        load_matrix_x4<kHeadDim>(b_fragments, k_tiles, buffer_row + 16 * nn + pattern_y_row(lane),
                                 2 * kk + pattern_y_chunk(lane));
        mma_16x8x16<T>(scores[2 * nn], q_fragments[kk], b_fragments[0], b_fragments[1]);
        mma_16x8x16<T>(scores[2 * nn + 1], q_fragments[kk], b_fragments[2], b_fragments[3]);
      }
    }

    const bool needs_mask = n0 + kBlockN > args.key_len || (args.causal && n0 + kBlockN - 1 > m0);
    const int row_base = m0 + warp_row + group;  // + 8 for the accumulators' second row
    if (needs_mask) {
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = n0 + 8 * t + 2 * quad + (e & 1);
          const int query = row_base + 8 * (e >> 1);
          if (key >= args.key_len || (args.causal && key > query)) scores[t][e] = -INFINITY;
        }
      }
    }
    // Online softmax: scores become P = exp2(scale_log2 S - m). The maximum is taken on the
    // raw scores (scale_log2 > 0, and rounding keeps the order).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float raw_max = -INFINITY;
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) raw_max = fmaxf(raw_max, fmaxf(scores[t][2 * r], scores[t][2 * r + 1]));
      const float tile_max = fmaxf(row_max[r], quad_max(raw_max) * args.scale_log2);
      // NOTE: a row with every key masked so far keeps m = -inf; shifting by 0 then keeps
      // exp2(-inf - shift) = 0 instead of NaN.
      const float shift = tile_max == -INFINITY ? 0.0f : tile_max;
      const float rescale = exp2_flush(row_max[r] - shift);
      row_max[r] = tile_max;
      row_sum[r] *= rescale;
#pragma unroll
      for (int dt = 0; dt < kDimTiles; ++dt) {
        acc[dt][2 * r] *= rescale;
        acc[dt][2 * r + 1] *= rescale;
      }
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          scores[t][e] = exp2_flush(fmaf(scores[t][e], args.scale_log2, -shift));
          row_sum[r] += scores[t][e];
        }
      }
    }
    if constexpr (kDropout) {
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t key = n0 + 8 * t + 2 * quad + (e & 1);
          const int64_t query = row_base + 8 * (e >> 1);
          if (weight_dropped(args.rng, args.dropout_p, batch_head, query, key, args.query_len, args.key_len)) {
            scores[t][e] = 0.0f;
          }
        }
      }
    }
    uint32_t p_fragments[kBlockN / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) accumulators_to_a<T>(p_fragments[kk], scores[2 * kk], scores[2 * kk + 1]);

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
#pragma unroll
      for (int dd = 0; dd < kHeadDim / 16; ++dd) {
        uint32_t b_fragments[4];
        load_matrix_x4_transposed<kHeadDim>(b_fragments, v_tiles, buffer_row + 16 * kk + pattern_x_row(lane),
                                            2 * dd + pattern_x_chunk(lane));
        mma_16x8x16<T>(acc[2 * dd], p_fragments[kk], b_fragments[0], b_fragments[1]);
        mma_16x8x16<T>(acc[2 * dd + 1], p_fragments[kk], b_fragments[2], b_fragments[3]);
      }
    }
  }

  // O = acc / (l (1 - p)), staged in the warp's own rows of q_tile (no other warp reads
  // them), then 16-byte stores; lse per row.
  // NOTE: the place is recomputed, not kept through the loop: those registers keep the
  // loop under 128 without spills.
  const ForwardPlace end_place = forward_place<kBlockM>(args);
  __syncwarp();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float total = quad_sum(row_sum[r]);
    const float inverse = total > 0.0f ? args.output_factor / total : 0.0f;
    const int row = warp_row + group + 8 * r;
#pragma unroll
    for (int dt = 0; dt < kDimTiles; ++dt) {
      *reinterpret_cast<uint32_t*>(q_tile + swizzled<kHeadDim>(row, 8 * dt + 2 * quad)) =
          pack_pair<T>(acc[dt][2 * r] * inverse, acc[dt][2 * r + 1] * inverse);
    }
    const int query = end_place.m0 + row;
    if (quad == 0 && query < args.query_len) {
      args.log_sum_exp[static_cast<int64_t>(end_place.batch_head) * args.query_len + query] =
          total > 0.0f ? (row_max[r] + log2f(total)) * kLn2 : -INFINITY;
    }
  }
  __syncwarp();
  constexpr int kChunksPerRow = kHeadDim / 8;
#pragma unroll
  for (int step = 0; step < 16 * kChunksPerRow / 32; ++step) {
    const int chunk_index = step * 32 + lane;
    const int row = chunk_index / kChunksPerRow, chunk = chunk_index % kChunksPerRow;
    const int query = end_place.m0 + warp_row + row;
    if (query < args.query_len && chunk * 8 < args.head_dim) {
      *reinterpret_cast<uint4*>(row_pointer(args.output, args.output_strides, end_place.b, end_place.h, query) + chunk * 8) =
          *reinterpret_cast<const uint4*>(q_tile + swizzled<kHeadDim>(warp_row + row, chunk * 8));
    }
  }
}

template <class T, int kHeadDim, bool kDropout>
void launch_forward(const ForwardArgs<T>& args, int64_t batch_heads, cudaStream_t stream) {
  using Tiles = ForwardTiles<kHeadDim, kDropout>;
  auto kernel = attention_forward_kernel<T, kHeadDim, kDropout>;
  allow_shared_memory(reinterpret_cast<const void*>(kernel), Tiles::kSharedBytes);
  const dim3 grid = attention_grid((args.query_len + Tiles::kBlockM - 1) / Tiles::kBlockM, batch_heads);
  kernel<<<grid, Tiles::kThreads, Tiles::kSharedBytes, stream>>>(args);
  MG_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention::tensor_core_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                                    const Tensor& output, const Tensor& log_sum_exp) {
  const int64_t batch = q.sizes()[0], heads = q.sizes()[1], query_len = q.sizes()[2], head_dim = q.sizes()[3];
  const int64_t key_len = k.sizes()[2];
  cudaStream_t stream = current_stream(q.device());
  const Tensor q_in = aligned_operand(q), k_in = aligned_operand(k), v_in = aligned_operand(v);
  const Tensor result = aligned_result(output);
  const bool dropout = params.dropout_p > 0.0;
  dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&]<class Element>() {
    if constexpr (std::is_same_v<Element, Half> || std::is_same_v<Element, BFloat16>) {
      using T = device_t<Element>;
      const ForwardArgs<T> args{device_data<Element>(q_in),
                                device_data<Element>(k_in),
                                device_data<Element>(v_in),
                                device_data<Element>(result),
                                static_cast<float*>(log_sum_exp.raw_data()),
                                head_strides(q_in),
                                head_strides(k_in),
                                head_strides(v_in),
                                head_strides(result),
                                static_cast<int>(heads),
                                static_cast<int>(query_len),
                                static_cast<int>(key_len),
                                static_cast<int>(head_dim),
                                params.is_causal,
                                std::max(static_cast<float>(std::abs(params.scale) * static_cast<double>(kLog2e)),
                                         std::numeric_limits<float>::min()),
                                params.scale < 0.0,
                                static_cast<float>(params.dropout_p),
                                dropout ? static_cast<float>(1.0 / (1.0 - params.dropout_p)) : 1.0f,
                                params.rng};
      const int64_t batch_heads = batch * heads;
      auto launch = [&]<int kHeadDim>() {
        if (dropout) launch_forward<T, kHeadDim, true>(args, batch_heads, stream);
        else launch_forward<T, kHeadDim, false>(args, batch_heads, stream);
      };
      if (head_dim <= 64) launch.template operator()<64>();
      else launch.template operator()<128>();
    }
  });
  finish_aligned_result(result, output);
}

}  // namespace mg::cuda
