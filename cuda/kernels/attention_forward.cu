// cuda/kernels/attention_forward.cu — the fused attention forward (FlashAttention-2) on
// tensor cores: output = softmax(scale * q k^T, causal mask, dropout) v and the float32
// log-sum-exp of each query row, without ever materialising the (Tq, Tk) matrix.
//
// A block of kWarps warps owns kBlockM query rows of one (batch, head); each warp owns
// 16 kRowTiles of them, whose Q fragments it keeps in registers. The block walks the key
// tiles (kBlockN keys) in order, each staged in shared memory by cp.async — the next K tile
// is copied while P V is computed, the V tile while Q K^T is computed — and, per warp:
//   S = Q K^T (16 kRowTiles x kBlockN, float32 accumulators), scaled into the log2 domain and masked
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
  int head_group;        // block_tile's, set at launch
};

// Tile sizes of one instantiation: kWarps warps of kRowTiles x 16 query rows each, key
// tiles of kBlockN.
template <int kHeadDim, int kWarps, int kRowTiles, int kBlockN>
struct ForwardTiles {
  static constexpr int kBlockM = 16 * kRowTiles * kWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSharedBytes = (kBlockM + 2 * kBlockN) * kHeadDim * 2;
};

// kMinBlocks: the blocks an SM must hold at once (the launch bound caps the registers at
// 64K / (kMinBlocks x 32 kWarps)).
template <class T, int kHeadDim, int kWarps, int kRowTiles, int kBlockN, int kMinBlocks, bool kDropout>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks) attention_forward_kernel(ForwardArgs<T> args) {
  using Tiles = ForwardTiles<kHeadDim, kWarps, kRowTiles, kBlockN>;
  constexpr int kBlockM = Tiles::kBlockM;
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
  const BlockTile place = block_tile(tiles, static_cast<int>(gridDim.x) / tiles, args.head_group);
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

  // Per row tile rt of the warp (rows warp_row + 16 rt + group and + 8):
  float acc[kRowTiles][kDimTiles][4] = {};
  float row_max[kRowTiles][2];  // log2 domain
  float row_sum[kRowTiles][2];  // this lane's columns only, summed over the quad at the end
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
    row_max[rt][0] = row_max[rt][1] = -INFINITY;
    row_sum[rt][0] = row_sum[rt][1] = 0.0f;
  }
  uint32_t q_fragments[kRowTiles][kHeadDim / 16][4];
  const int warp_row = warp * 16 * kRowTiles;  // the warp's first row in the tile

  copy_async_wait_all();
  __syncthreads();  // Q and K(0) are in
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      load_matrix_x4<kHeadDim>(q_fragments[rt][kk], q_tile, warp_row + 16 * rt + pattern_x_row(lane),
                               2 * kk + pattern_x_chunk(lane));
    }
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

    // S = Q K^T for the warp's rows; each K fragment serves every row tile.
    float scores[kRowTiles][kKeyTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
      for (int nn = 0; nn < kBlockN / 16; ++nn) {
        uint32_t b_fragments[4];
        load_matrix_x4<kHeadDim>(b_fragments, k_tile, 16 * nn + pattern_y_row(lane), 2 * kk + pattern_y_chunk(lane));
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          mma_16x8x16<T>(scores[rt][2 * nn], q_fragments[rt][kk], b_fragments[0], b_fragments[1]);
          mma_16x8x16<T>(scores[rt][2 * nn + 1], q_fragments[rt][kk], b_fragments[2], b_fragments[3]);
        }
      }
    }

    const bool needs_mask = n0 + kBlockN > args.key_len || (args.causal && n0 + kBlockN - 1 > m0);
    uint32_t p_fragments[kRowTiles][kBlockN / 16][4];
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      const int row_base = m0 + warp_row + 16 * rt + group;  // + 8 for the accumulators' second row
      // Into the log2 domain, then the mask (after scaling, so any sign of scale works).
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          scores[rt][t][e] *= args.scale_log2;
          if (needs_mask) {
            const int key = n0 + 8 * t + 2 * quad + (e & 1);
            const int query = row_base + 8 * (e >> 1);
            if (key >= args.key_len || (args.causal && key > query)) scores[rt][t][e] = -INFINITY;
          }
        }
      }
      // Online softmax: scores become P = exp2(S - m).
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float tile_max = row_max[rt][r];
#pragma unroll
        for (int t = 0; t < kKeyTiles; ++t) {
          tile_max = fmaxf(tile_max, fmaxf(scores[rt][t][2 * r], scores[rt][t][2 * r + 1]));
        }
        tile_max = quad_max(tile_max);
        // NOTE: a row with every key masked so far keeps m = -inf; shifting by 0 then keeps
        // exp2(-inf - shift) = 0 instead of NaN.
        const float shift = tile_max == -INFINITY ? 0.0f : tile_max;
        const float rescale = exp2f(row_max[rt][r] - shift);
        row_max[rt][r] = tile_max;
        row_sum[rt][r] *= rescale;
#pragma unroll
        for (int dt = 0; dt < kDimTiles; ++dt) {
          acc[rt][dt][2 * r] *= rescale;
          acc[rt][dt][2 * r + 1] *= rescale;
        }
#pragma unroll
        for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            scores[rt][t][e] = exp2f(scores[rt][t][e] - shift);
            row_sum[rt][r] += scores[rt][t][e];
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
            if (uniform_from_bits(philox_block(args.rng, index)[0]) < args.dropout_p) scores[rt][t][e] = 0.0f;
          }
        }
      }
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        accumulators_to_a<T>(p_fragments[rt][kk], scores[rt][2 * kk], scores[rt][2 * kk + 1]);
      }
    }

    copy_async_wait_all();
    __syncthreads();  // V(n) is in; every warp is done with K(n)
    if (key_block + 1 < key_blocks) {
      load_tile<kBlockN, kHeadDim, kThreads>(k_tile, k_rows + (n0 + kBlockN) * args.k_strides.row, args.k_strides.row,
                                             args.key_len - n0 - kBlockN, args.head_dim);
      copy_async_commit();
    }
    // O += P V; each V fragment serves every row tile.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
#pragma unroll
      for (int dd = 0; dd < kHeadDim / 16; ++dd) {
        uint32_t b_fragments[4];
        load_matrix_x4_transposed<kHeadDim>(b_fragments, v_tile, 16 * kk + pattern_x_row(lane),
                                            2 * dd + pattern_x_chunk(lane));
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          mma_16x8x16<T>(acc[rt][2 * dd], p_fragments[rt][kk], b_fragments[0], b_fragments[1]);
          mma_16x8x16<T>(acc[rt][2 * dd + 1], p_fragments[rt][kk], b_fragments[2], b_fragments[3]);
        }
      }
    }
  }

  // O = acc / (l (1 - p)), staged in the warp's own rows of q_tile (no other warp reads
  // them), then 16-byte stores; lse per row.
  __syncwarp();
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float total = quad_sum(row_sum[rt][r]);
      const float inverse = total > 0.0f ? args.output_factor / total : 0.0f;
      const int row = warp_row + 16 * rt + group + 8 * r;
#pragma unroll
      for (int dt = 0; dt < kDimTiles; ++dt) {
        *reinterpret_cast<uint32_t*>(q_tile + swizzled<kHeadDim>(row, 8 * dt + 2 * quad)) =
            pack_pair<T>(acc[rt][dt][2 * r] * inverse, acc[rt][dt][2 * r + 1] * inverse);
      }
      const int query = m0 + row;
      if (quad == 0 && query < args.query_len) {
        args.log_sum_exp[static_cast<int64_t>(batch_head) * args.query_len + query] =
            total > 0.0f ? (row_max[rt][r] + log2f(total)) * kLn2 : -INFINITY;
      }
    }
  }
  __syncwarp();
  constexpr int kChunksPerRow = kHeadDim / 8;
#pragma unroll
  for (int step = 0; step < 16 * kRowTiles * kChunksPerRow / 32; ++step) {
    const int chunk_index = step * 32 + lane;
    const int row = chunk_index / kChunksPerRow, chunk = chunk_index % kChunksPerRow;
    const int query = m0 + warp_row + row;
    if (query < args.query_len && chunk * 8 < args.head_dim) {
      *reinterpret_cast<uint4*>(row_pointer(args.output, args.output_strides, b, h, query) + chunk * 8) =
          *reinterpret_cast<const uint4*>(q_tile + swizzled<kHeadDim>(warp_row + row, chunk * 8));
    }
  }
}

template <class T, int kHeadDim, int kWarps, int kRowTiles, int kBlockN, int kMinBlocks, bool kDropout>
void launch_forward(ForwardArgs<T> args, int64_t batch_heads, int head_group, cudaStream_t stream) {
  using Tiles = ForwardTiles<kHeadDim, kWarps, kRowTiles, kBlockN>;
  auto kernel = attention_forward_kernel<T, kHeadDim, kWarps, kRowTiles, kBlockN, kMinBlocks, kDropout>;
  allow_shared_memory(reinterpret_cast<const void*>(kernel), Tiles::kSharedBytes);
  args.head_group = attention_head_group(head_group, batch_heads);
  const dim3 grid = attention_grid((args.query_len + Tiles::kBlockM - 1) / Tiles::kBlockM, batch_heads);
  kernel<<<grid, Tiles::kThreads, Tiles::kSharedBytes, stream>>>(args);
  MG_CUDA_CHECK_LAUNCH();
}

// The variants MG_ATTENTION_FORWARD_VARIANT picks for bfloat16, head dim <= 64, no dropout
// (docs/attention_kernels.md: the idea and the prediction of each). head_group 0: all heads
// in one group (the longest tiles of every head first).
using BFloat16Launch = void (*)(ForwardArgs<__nv_bfloat16>, int64_t, int, cudaStream_t);
struct ForwardVariant {
  BFloat16Launch launch;
  int head_group;
};
template <int kWarps, int kRowTiles, int kBlockN, int kMinBlocks = 1>
constexpr BFloat16Launch kBFloat16Launch =
    launch_forward<__nv_bfloat16, 64, kWarps, kRowTiles, kBlockN, kMinBlocks, false>;
constexpr ForwardVariant kForwardVariants[] = {
    {kBFloat16Launch<4, 1, 64>, 0},     // 0: e54d859: 4 warps x 16 rows (64 a block), 64-key tiles
    {kBFloat16Launch<4, 2, 64>, 1},     // 1: c0a9196: 4 warps x 32 rows, each head's tiles together
    {kBFloat16Launch<4, 2, 64>, 0},     // 2: 4 warps x 32 rows, longest tiles of all heads first
    {kBFloat16Launch<8, 1, 64, 2>, 0},  // 3: 8 warps x 16 rows (128 a block), at most 128 registers
    {kBFloat16Launch<4, 1, 64, 4>, 0},  // 4: as 0, at most 128 registers (4 blocks an SM)
    {kBFloat16Launch<8, 1, 64, 2>, 16},  // 5: as 3, heads in groups of 16 (L2 reuse)
};
constexpr int kForwardVariantCount = sizeof(kForwardVariants) / sizeof(kForwardVariants[0]);
// NOTE: the default for the other calls at head dim 64 too (float16): variant 3's tiles
// and order; with dropout (Philox needs registers: 8 warps at 128 registers would spill)
// variant 0's. Head dim 128: 4 warps x 16 rows, 64-key tiles (48 KiB of shared memory;
// the accumulators of 32 rows a warp would not fit in the registers).
constexpr int kDefaultForwardVariant = 3;
constexpr int kDefaultHeadGroup = 0;

template <class T, int kHeadDim, bool kDropout>
void launch_default_forward(const ForwardArgs<T>& args, int64_t batch_heads, cudaStream_t stream) {
  if constexpr (kHeadDim <= 64 && !kDropout) {
    launch_forward<T, kHeadDim, 8, 1, 64, 2, kDropout>(args, batch_heads, kDefaultHeadGroup, stream);
  } else {
    launch_forward<T, kHeadDim, 4, 1, 64, 1, kDropout>(args, batch_heads, kDefaultHeadGroup, stream);
  }
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
      ForwardArgs<T> args{device_data<Element>(q_in),
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
                          params.rng,
                          0};
      const int64_t batch_heads = batch * heads;
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        if (head_dim <= 64 && !dropout) {
          const ForwardVariant& variant = kForwardVariants[attention_variant(
              "MG_ATTENTION_FORWARD_VARIANT", kForwardVariantCount, kDefaultForwardVariant)];
          variant.launch(args, batch_heads, variant.head_group, stream);
          return;
        }
      }
      auto launch = [&]<int kHeadDim>() {
        if (dropout) launch_default_forward<T, kHeadDim, true>(args, batch_heads, stream);
        else launch_default_forward<T, kHeadDim, false>(args, batch_heads, stream);
      };
      if (head_dim <= 64) launch.template operator()<64>();
      else launch.template operator()<128>();
    }
  });
  finish_aligned_result(result, output);
}

}  // namespace mg::cuda
