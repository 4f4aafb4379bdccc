// cuda/kernels/attention_simt_backward.cu — the fused attention backward (FlashAttention-2)
// for float32 on the FP32 FMA units, no tensor cores and no TF32, as the forward
// (attention_simt_forward.cu); the block's layout and what the two share:
// attention_simt_tiles.cuh.
//
// A block per 64 keys, walking the query tiles that attend to them, after the
// prepare kernel (D = rowsum(dO o O) and grad_q zeroed):
//   S = Q K^T and dP = dO V^T (registers); P = exp(scale S - lse), masked;
//   with Z the dropout mask and r = 1 / (1 - p): (P o Z r)^T and dS^T = (scale P o (dP o Z r
//     - D))^T to shared memory;
//   dV += (P o Z r)^T dO and dK += dS^T Q (registers, written once at the end);
//   dQ = dS K added into grad_q by float32 atomics: grad_q is float32 itself, so no
//   accumulator in a workspace (only D is: cuda/plan/attention_workspace.h).
//   Q(m + 1) and dO(m + 1) are copied while dQ(m) is computed.
// Deterministic (core/determinism.h): the blocks add dQ into slices of a float32 workspace
// instead, one (B, H, Tq, D) slice per block of keys (zeroed first), where every element
// takes one value, and a last kernel sums the slices in key order into grad_q.
#include <cmath>

#include "memgrad/core/determinism.h"
#include "memgrad/core/factory.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/attention_simt_tiles.cuh"
#include "memgrad/cuda/kernels/attention_tiles.cuh"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/plan/attention_workspace.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda::attention {

namespace {

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
  float* grad_q;             // (B, H, Tq, D), zeroed by the prepare kernel (deterministic: slice 0 of the slices)
  int64_t grad_q_slice_elements;  // deterministic: B H Tq D, the next block of keys' slice; else 0
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
  float* const grad_q = args.grad_q + place.tile_rank * args.grad_q_slice_elements;
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
          add_columns(row_pointer(grad_q, args.grad_q_strides, b, h, query), 64 * g + 4 * tx, grad_q_acc[r],
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

// The workspace plan's key block (a deterministic backward's dQ slices) is this kTile.
static_assert(SimtTiles<64>::kTile == 64 && SimtTiles<128>::kTile == 64);

// grad_q = the sum of the slices, in key order (the deterministic backward's last kernel).
__global__ void sum_grad_q_slices_kernel(const float* slices, int slice_count, int64_t rows, int heads, int query_len,
                                         int head_dim, float* grad_q, HeadStrides grad_q_strides) {
  const int64_t slice_elements = rows * head_dim;
  for (int64_t i = global_thread_index(); i < slice_elements; i += grid_stride()) {
    float sum = slices[i];
    for (int slice = 1; slice < slice_count; ++slice) sum += slices[slice * slice_elements + i];
    const int64_t row = i / head_dim, batch_head = row / query_len;
    row_pointer(grad_q, grad_q_strides, batch_head / heads, batch_head % heads, row % query_len)[i % head_dim] = sum;
  }
}

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

void simt_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                   const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  const int64_t batch = q.sizes()[0], heads = q.sizes()[1], query_len = q.sizes()[2], head_dim = q.sizes()[3];
  const int64_t rows = batch * heads * query_len;
  cudaStream_t stream = current_stream(q.device());
  const bool dropout = params.dropout_p > 0.0, deterministic = deterministic_algorithms();
  // (B, H, Tq) D, after the deterministic backward's dQ slices; freed on this stream once
  // the kernels are queued (the caching allocator orders its reuse).
  const AttentionBackwardWorkspace sizes =
      attention_backward_workspace(q.dtype(), q.sizes(), k.sizes()[2], dropout, deterministic);
  const Tensor workspace =
      empty({sizes.elements()},
            {.dtype = kAttentionWorkspaceDType, .device = q.device(), .category = MemoryCategory::Workspace});
  const Tensor delta = workspace.narrow(0, sizes.grad_q_accumulator, sizes.delta);
  // Where the blocks add dQ: grad_q, or slice 0 of the slices (as a (B, H, Tq, D) tensor).
  const Tensor grad_q_target =
      deterministic ? workspace.narrow(0, 0, rows * head_dim).view({batch, heads, query_len, head_dim}) : grad_q;
  if (deterministic) {
    MG_CUDA_CHECK(cudaMemsetAsync(workspace.raw_data(), 0, sizes.grad_q_accumulator * sizeof(float), stream));
  }
  const LaunchConfig prepare = launch_config(rows * 32);
  simt_prepare_kernel<<<prepare.blocks, prepare.threads, 0, stream>>>(
      float_data(grad_output), head_strides(grad_output), float_data(output), head_strides(output),
      mutable_float_data(grad_q), head_strides(grad_q), static_cast<int>(heads), static_cast<int>(query_len),
      static_cast<int>(head_dim), rows, mutable_float_data(delta));
  MG_CUDA_CHECK_LAUNCH();

  const BackwardArgs args{float_data(q),
                          float_data(k),
                          float_data(v),
                          float_data(grad_output),
                          float_data(log_sum_exp),
                          float_data(delta),
                          mutable_float_data(grad_q_target),
                          deterministic ? rows * head_dim : 0,
                          mutable_float_data(grad_k),
                          mutable_float_data(grad_v),
                          head_strides(q),
                          head_strides(k),
                          head_strides(v),
                          head_strides(grad_output),
                          head_strides(grad_q_target),
                          head_strides(grad_k),
                          head_strides(grad_v),
                          static_cast<int>(heads),
                          static_cast<int>(query_len),
                          static_cast<int>(k.sizes()[2]),
                          static_cast<int>(head_dim),
                          params.is_causal,
                          all_rows_aligned({&q, &k, &v, &grad_output}),
                          all_rows_aligned({&grad_q_target, &grad_k, &grad_v}),
                          static_cast<float>(params.scale),
                          static_cast<float>(params.dropout_p),
                          dropout ? static_cast<float>(1.0 / (1.0 - params.dropout_p)) : 1.0f,
                          params.rng};
  launch_for<LaunchBackward>(head_dim, dropout, args, batch * heads, stream);
  if (deterministic) {
    const LaunchConfig sum = launch_config(rows * head_dim);
    sum_grad_q_slices_kernel<<<sum.blocks, sum.threads, 0, stream>>>(
        float_data(workspace), static_cast<int>(sizes.grad_q_slices), rows, static_cast<int>(heads),
        static_cast<int>(query_len), static_cast<int>(head_dim), mutable_float_data(grad_q), head_strides(grad_q));
    MG_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace mg::cuda::attention
