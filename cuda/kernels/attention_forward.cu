// cuda/kernels/attention_forward.cu — the fused attention forward (FlashAttention-2) on
// tensor cores: output = softmax(scale * q k^T, causal mask, dropout) v and the float32
// log-sum-exp of each query row, without ever materialising the (Tq, Tk) matrix.
//
// A block of kWarps warps owns kBlockM = 16 kWarps query rows of one (batch, head); each
// warp owns 16 of them, whose Q fragments it keeps in registers. The block walks the key
// tiles (kBlockN keys) in order, each staged in shared memory by cp.async — the next K tile
// is copied while P V is computed, the V tile while Q K^T is computed — and, per warp:
//   S = Q K^T (16 x kBlockN, float32 accumulators), scaled into the log2 domain and masked
//     (keys past Tk; with is_causal, keys j > i);
//   online softmax: the running maximum m and the per-lane partial sum l of each row; when
//     m grows, l and the output accumulators are rescaled by exp2(m_old - m_new);
//   P = exp2(S - m), summed into l before dropout (the softmax's denominator is over all
//     keys), then dropped (kept weights are not rescaled here: 1 / (1 - p) is folded into
//     the final division) and fed as float16/bfloat16 A fragments straight from registers
//     into O += P V.
// Key tiles entirely above the diagonal are never visited (is_causal). At the end
// O = acc / (l (1 - p)) goes through shared memory (the warp's own Q rows) to 16-byte
// stores, and lse = (m + log2 l) ln 2 in natural-log units, as core/kernels.h states.
//
// Dropout keeps weight (b, h, i, j) as the contract says: one Philox block per element,
// index ((b H + h) Tq + i) Tk + j, so the mask is the math path's.
#include <cmath>
#include <limits>

#include "core/random.h"
#include "cuda/check.h"
#include "cuda/kernels/attention_tiles.cuh"
#include "cuda/kernels/cuda_kernels.h"
#include "cuda/kernels/strided_indexer.cuh"
#include "cuda/runtime.h"

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
  float scale_log2;      // scale * log2(e): scores go straight into exp2
  float dropout_p;       // compared with the uniform as float(p), as the contract says
  float output_factor;   // 1 / (1 - p)
  PhiloxState rng;
};

// The one configuration of each case (head dim bucket, dropout; the same for float16 and
// bfloat16), measured on the H200 (docs/attention_kernels.md). Warps own 16 query rows;
// key tiles of 64.
//   head dim <= 64 without dropout: 8 warps (128 rows a block), 2 blocks an SM, so at most
//     128 registers and 16 warps an SM to overlap the exponentials with the products, and
//     each K / V tile staged in shared memory serves 128 rows;
//   with dropout (Philox's registers would spill under 128) and at head dim 128 (twice the
//     accumulators; 48 KiB of shared memory): 4 warps (64 rows), no register cap.
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
  static constexpr int kSharedBytes = (kBlockM + 2 * kBlockN) * kHeadDim * 2;
};

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
  T* k_tile = q_tile + kBlockM * kHeadDim;         // (kBlockN, kHeadDim)
  T* v_tile = k_tile + kBlockN * kHeadDim;         // (kBlockN, kHeadDim)

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;  // accumulator rows group, group + 8; columns 2 quad, +1
  const int tiles = (args.query_len + kBlockM - 1) / kBlockM;
  const BlockTile place = block_tile(static_cast<int>(gridDim.x) / tiles);
  const int batch_head = place.batch_head;
  const int b = batch_head / args.heads, h = batch_head % args.heads;
  // NOTE: rank 0 is the last query tile, the one with the most keys (is_causal).
  const int m0 = (tiles - 1 - place.tile_rank) * kBlockM;
  const int key_end = args.causal ? min(args.key_len, m0 + kBlockM) : args.key_len;
  const int key_blocks = (key_end + kBlockN - 1) / kBlockN;

  const T* k_rows = row_pointer(args.k, args.k_strides, b, h, 0);
  const T* v_rows = row_pointer(args.v, args.v_strides, b, h, 0);
  load_tile<kBlockM, kHeadDim, kThreads>(q_tile, row_pointer(args.q, args.q_strides, b, h, m0), args.q_strides.row,
                                         args.query_len - m0, args.head_dim);
  load_tile<kBlockN, kHeadDim, kThreads>(k_tile, k_rows, args.k_strides.row, args.key_len, args.head_dim);
  copy_async_commit();

  // For the warp's rows warp_row + group (r = 0) and + 8 (r = 1):
  float acc[kDimTiles][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY};  // log2 domain
  float row_sum[2] = {0.0f, 0.0f};  // this lane's columns only, summed over the quad at the end
  uint32_t q_fragments[kHeadDim / 16][4];
  const int warp_row = warp * 16;  // the warp's first row in the tile

  copy_async_wait_all();
  __syncthreads();  // Q and K(0) are in
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    load_matrix_x4<kHeadDim>(q_fragments[kk], q_tile, warp_row + pattern_x_row(lane), 2 * kk + pattern_x_chunk(lane));
  }

  for (int key_block = 0; key_block < key_blocks; ++key_block) {
    const int n0 = key_block * kBlockN;
    if (key_block > 0) {
      copy_async_wait_all();
      __syncthreads();  // K(n) is in; every warp is done with V(n - 1)
    }
    load_tile<kBlockN, kHeadDim, kThreads>(v_tile, v_rows + n0 * args.v_strides.row, args.v_strides.row,
                                           args.key_len - n0, args.head_dim);
    copy_async_commit();

    // S = Q K^T for the warp's rows.
    float scores[kKeyTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
      for (int nn = 0; nn < kBlockN / 16; ++nn) {
        uint32_t b_fragments[4];
        load_matrix_x4<kHeadDim>(b_fragments, k_tile, 16 * nn + pattern_y_row(lane), 2 * kk + pattern_y_chunk(lane));
        mma_16x8x16<T>(scores[2 * nn], q_fragments[kk], b_fragments[0], b_fragments[1]);
        mma_16x8x16<T>(scores[2 * nn + 1], q_fragments[kk], b_fragments[2], b_fragments[3]);
      }
    }

    const bool needs_mask = n0 + kBlockN > args.key_len || (args.causal && n0 + kBlockN - 1 > m0);
    const int row_base = m0 + warp_row + group;  // + 8 for the accumulators' second row
    // Into the log2 domain, then the mask (after scaling, so any sign of scale works).
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        scores[t][e] *= args.scale_log2;
        if (needs_mask) {
          const int key = n0 + 8 * t + 2 * quad + (e & 1);
          const int query = row_base + 8 * (e >> 1);
          if (key >= args.key_len || (args.causal && key > query)) scores[t][e] = -INFINITY;
        }
      }
    }
    // Online softmax: scores become P = exp2(S - m).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = row_max[r];
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) tile_max = fmaxf(tile_max, fmaxf(scores[t][2 * r], scores[t][2 * r + 1]));
      tile_max = quad_max(tile_max);
      // NOTE: a row with every key masked so far keeps m = -inf; shifting by 0 then keeps
      // exp2(-inf - shift) = 0 instead of NaN.
      const float shift = tile_max == -INFINITY ? 0.0f : tile_max;
      const float rescale = exp2f(row_max[r] - shift);
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
          scores[t][e] = exp2f(scores[t][e] - shift);
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
          const uint64_t index = (static_cast<uint64_t>(batch_head) * args.query_len + query) * args.key_len + key;
          if (uniform_from_bits(philox_block(args.rng, index)[0]) < args.dropout_p) scores[t][e] = 0.0f;
        }
      }
    }
    uint32_t p_fragments[kBlockN / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) accumulators_to_a<T>(p_fragments[kk], scores[2 * kk], scores[2 * kk + 1]);

    copy_async_wait_all();
    __syncthreads();  // V(n) is in; every warp is done with K(n)
    if (key_block + 1 < key_blocks) {
      load_tile<kBlockN, kHeadDim, kThreads>(k_tile, k_rows + (n0 + kBlockN) * args.k_strides.row, args.k_strides.row,
                                             args.key_len - n0 - kBlockN, args.head_dim);
      copy_async_commit();
    }
    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
#pragma unroll
      for (int dd = 0; dd < kHeadDim / 16; ++dd) {
        uint32_t b_fragments[4];
        load_matrix_x4_transposed<kHeadDim>(b_fragments, v_tile, 16 * kk + pattern_x_row(lane),
                                            2 * dd + pattern_x_chunk(lane));
        mma_16x8x16<T>(acc[2 * dd], p_fragments[kk], b_fragments[0], b_fragments[1]);
        mma_16x8x16<T>(acc[2 * dd + 1], p_fragments[kk], b_fragments[2], b_fragments[3]);
      }
    }
  }

  // O = acc / (l (1 - p)), staged in the warp's own rows of q_tile (no other warp reads
  // them), then 16-byte stores; lse per row.
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
    const int query = m0 + row;
    if (quad == 0 && query < args.query_len) {
      args.log_sum_exp[static_cast<int64_t>(batch_head) * args.query_len + query] =
          total > 0.0f ? (row_max[r] + log2f(total)) * kLn2 : -INFINITY;
    }
  }
  __syncwarp();
  constexpr int kChunksPerRow = kHeadDim / 8;
#pragma unroll
  for (int step = 0; step < 16 * kChunksPerRow / 32; ++step) {
    const int chunk_index = step * 32 + lane;
    const int row = chunk_index / kChunksPerRow, chunk = chunk_index % kChunksPerRow;
    const int query = m0 + warp_row + row;
    if (query < args.query_len && chunk * 8 < args.head_dim) {
      *reinterpret_cast<uint4*>(row_pointer(args.output, args.output_strides, b, h, query) + chunk * 8) =
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

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                       const Tensor& output, const Tensor& log_sum_exp) {
  check_attention_operands("scaled_dot_product_attention", q, k, v);
  const int64_t batch = q.sizes()[0], heads = q.sizes()[1], query_len = q.sizes()[2], head_dim = q.sizes()[3];
  const int64_t key_len = k.sizes()[2];
  if (batch * heads * query_len == 0) return;
  Device device = q.device();
  DeviceGuard guard(device);
  if (key_len == 0) {  // no key to attend to: the empty sum
    fill(output, 0.0);
    fill(log_sum_exp, -std::numeric_limits<double>::infinity());
    return;
  }
  cudaStream_t stream = current_stream(device);
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
                                static_cast<float>(params.scale * static_cast<double>(kLog2e)),
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
