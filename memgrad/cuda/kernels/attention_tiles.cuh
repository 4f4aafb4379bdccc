// cuda/kernels/attention_tiles.cuh — what the fused attention kernels share
// (attention_forward.cu, attention_backward.cu on tensor cores; attention_simt_forward.cu,
// attention_simt_backward.cu on FP32 FMA, through attention_simt_tiles.cuh): tensor-core and
// shared-memory instructions as inline PTX, the swizzled layout of a tile in shared memory,
// the asynchronous copy of a tile from global memory, the dropout rule, the block order, and
// the host's view of the (B, H, T, D) operands.
//
// The matrix products are mma.sync m16n8k16 (float16 or bfloat16 inputs, float32
// accumulators). A warp's operand fragments come from shared memory through ldmatrix, in one
// of two address patterns (a lane gives the address of one 16-byte row of one 8x8 matrix):
//   pattern X: row r0 + (lane & 15), chunk c0 + (lane >> 4)
//     - an A operand (16 rows of M x 16 of K) stored row-major [m][k], loaded plainly;
//     - two B operands (16 of K x 2 x 8 of N) stored [k][n], loaded transposed.
//   pattern Y: row r0 + (lane & 7) + ((lane >> 4) << 3), chunk c0 + ((lane >> 3) & 1)
//     - two B operands (2 x 8 of N x 16 of K) stored [n][k], loaded plainly;
//     - an A operand (16 of M x 16 of K) stored [k][m], loaded transposed.
// For B, registers 0 and 1 are the first n8 tile's fragment, 2 and 3 the second's.
//
// A tile is stored as rows of kCols 16-bit elements (kCols a multiple of 64), in 16-byte
// chunks; chunk c of row r sits at position c ^ (r & 7) of its row (an XOR swizzle), so the
// eight rows one ldmatrix matrix reads fall in eight different bank groups. A narrower tile
// (kCols 16 or 32) is stored as the 64-column tile whose rows each hold 64 / kCols of its
// rows side by side, which keeps that property.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "memgrad/core/kernels.h"
#include "memgrad/core/random.h"
#include "memgrad/core/tensor.h"

namespace mg::cuda::attention {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// Element strides of a (B, H, T, D) operand's first three dims (the last has stride 1).
struct HeadStrides {
  int64_t batch, head, row;
};

template <class T>
__device__ __forceinline__ const T* row_pointer(const T* base, HeadStrides strides, int64_t b, int64_t h,
                                                int64_t row) {
  return base + b * strides.batch + h * strides.head + row * strides.row;
}
template <class T>
__device__ __forceinline__ T* row_pointer(T* base, HeadStrides strides, int64_t b, int64_t h, int64_t row) {
  return base + b * strides.batch + h * strides.head + row * strides.row;
}

// ---- shared-memory layout ----

// Element offset of (row, col) in a swizzled tile of kCols columns.
template <int kCols>
__device__ __forceinline__ int swizzled(int row, int col) {
  if constexpr (kCols == 32) {
    return swizzled<64>(row / 2, (row % 2) * 32 + col);  // two rows a 64-column row
  } else {
    static_assert(kCols % 64 == 0, "the swizzle needs at least eight 16-byte chunks per row");
    return row * kCols + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
  }
}

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// ---- asynchronous copies (cp.async) ----

// The first `source_bytes` (0 to 16) of 16 bytes from global to shared memory, the rest
// zeros (`source`, 16-byte aligned, is not read past them but must be a valid address).
__device__ __forceinline__ void copy_async_16_prefix(uint32_t destination, const void* source, int source_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(source),
               "r"(source_bytes));
}
// 16 bytes, or 16 zero bytes when !valid.
__device__ __forceinline__ void copy_async_16(uint32_t destination, const void* source, bool valid) {
  copy_async_16_prefix(destination, source, valid ? 16 : 0);
}
// 4 bytes, or 4 zero bytes when !valid.
__device__ __forceinline__ void copy_async_4(uint32_t destination, const void* source, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(destination), "l"(source),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits for every copy this thread issued (a __syncthreads must follow before other
// threads read the data).
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

// Issues the copy of rows [0, kRows) x columns [0, kCols) of a row-major global tile
// (`row_stride` elements apart) into a swizzled shared tile; rows >= rows_valid and
// columns >= cols_valid (a multiple of 8) are zero-filled. Row 0 must exist.
template <int kRows, int kCols, int kThreads, class T>
__device__ __forceinline__ void load_tile(T* tile, const T* global, int64_t row_stride, int rows_valid,
                                          int cols_valid) {
  constexpr int kChunksPerRow = kCols / 8;
  static_assert((kRows * kChunksPerRow) % kThreads == 0, "every thread copies the same number of chunks");
#pragma unroll
  for (int step = 0; step < kRows * kChunksPerRow / kThreads; ++step) {
    int chunk_index = step * kThreads + threadIdx.x;
    int row = chunk_index / kChunksPerRow, chunk = chunk_index % kChunksPerRow;
    bool valid = row < rows_valid && chunk * 8 < cols_valid;
    const T* source = valid ? global + row * row_stride + chunk * 8 : global;
    copy_async_16(shared_address(tile + swizzled<kCols>(row, chunk * 8)), source, valid);
  }
}

// ---- fragments ----

// ldmatrix of four 8x8 matrices; `tile` is the swizzled tile, (row, chunk) this lane's
// 16-byte row from the patterns at the top.
template <int kCols, class T>
__device__ __forceinline__ void load_matrix_x4(uint32_t (&fragment)[4], const T* tile, int row, int chunk) {
  uint32_t address = shared_address(tile + swizzled<kCols>(row, chunk * 8));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(address));
}
template <int kCols, class T>
__device__ __forceinline__ void load_matrix_x4_transposed(uint32_t (&fragment)[4], const T* tile, int row,
                                                          int chunk) {
  uint32_t address = shared_address(tile + swizzled<kCols>(row, chunk * 8));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(address));
}

// The lane's (row, chunk) offsets for the two patterns at the top.
__device__ __forceinline__ int pattern_x_row(int lane) { return lane & 15; }
__device__ __forceinline__ int pattern_x_chunk(int lane) { return lane >> 4; }
__device__ __forceinline__ int pattern_y_row(int lane) { return (lane & 7) + ((lane >> 4) << 3); }
__device__ __forceinline__ int pattern_y_chunk(int lane) { return (lane >> 3) & 1; }

// accumulator (16x8, float32) += a (16x16) * b (16x8).
template <class T>
__device__ __forceinline__ void mma_16x8x16(float (&accumulator)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(accumulator[0]), "+f"(accumulator[1]), "+f"(accumulator[2]), "+f"(accumulator[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "mma_16x8x16: float16 or bfloat16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(accumulator[0]), "+f"(accumulator[1]), "+f"(accumulator[2]), "+f"(accumulator[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats as a pair of T in one register (`low` at the lower column).
template <class T>
__device__ __forceinline__ uint32_t pack_pair(float low, float high) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 pair = __floats2half2_rn(low, high);
    return *reinterpret_cast<uint32_t*>(&pair);
  } else {
    __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
    return *reinterpret_cast<uint32_t*>(&pair);
  }
}
template <class T>
__device__ __forceinline__ float2 unpack_pair(uint32_t bits) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(&bits));
  } else {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
  }
}

// The A fragment (16 rows x 16 of K) made of the accumulators of two adjacent n8 tiles
// (columns 16 kk .. 16 kk + 15): how a product's result feeds the next product.
template <class T>
__device__ __forceinline__ void accumulators_to_a(uint32_t (&a)[4], const float (&left)[4], const float (&right)[4]) {
  a[0] = pack_pair<T>(left[0], left[1]);    // row g, columns 2c, 2c+1
  a[1] = pack_pair<T>(left[2], left[3]);    // row g+8
  a[2] = pack_pair<T>(right[0], right[1]);  // row g, columns 8 + 2c, 8 + 2c + 1
  a[3] = pack_pair<T>(right[2], right[3]);  // row g+8
}

// Sum / maximum over the four lanes of a quad (the lanes holding one accumulator row).
__device__ __forceinline__ float quad_sum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  return value + __shfl_xor_sync(0xffffffffu, value, 2);
}
__device__ __forceinline__ float quad_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 2));
}

// ---- dropout ----

// AttentionParams' rule (core/kernels.h): weight (query, key) of (batch x head) `batch_head`
// is dropped when the Philox block at its index in the contiguous (B, H, Tq, Tk) weights
// gives a uniform below p.
__device__ __forceinline__ bool weight_dropped(const PhiloxState& rng, float dropout_p, int64_t batch_head,
                                               int64_t query, int64_t key, int query_len, int key_len) {
  const uint64_t index = (static_cast<uint64_t>(batch_head) * query_len + query) * key_len + key;
  return uniform_from_bits(philox_block(rng, index)[0]) < dropout_p;
}

// ---- block order ----

// The tile and (batch x head) a block of a 1-D grid of tiles x batch_heads blocks runs: the
// blocks go tile rank 0 of every head, then rank 1, ... Rank 0 is the longest tile with
// is_causal (the kernels map ranks to tiles so), so the long blocks start first and the
// short ones fill the last wave.
struct BlockTile {
  int tile_rank, batch_head;
};
__device__ __forceinline__ BlockTile block_tile(int batch_heads) {
  const int block = static_cast<int>(blockIdx.x);
  return {block / batch_heads, block % batch_heads};
}

// ---- host side ----

// The kernels of each dtype, behind the table's attention_forward and attention_backward
// (attention.cu), which have checked the operands, made their device current and handled
// empty sizes (no query, no key) already. Arguments as in core/kernels.h.
// attention_forward.cu, attention_backward.cu: float16 and bfloat16, on tensor cores.
void tensor_core_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                         const Tensor& output, const Tensor& log_sum_exp);
void tensor_core_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                          const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v);
// attention_simt_forward.cu, attention_simt_backward.cu: float32, on the FP32 FMA units.
void simt_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                  const Tensor& output, const Tensor& log_sum_exp);
void simt_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                   const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v);

// Whether 16-byte accesses to every row of a (B, H, T, D) operand are aligned.
bool rows_aligned_16(const Tensor& tensor);
// A dense copy (WORKSPACE) of an operand whose rows are not 16-byte aligned, else itself.
Tensor aligned_operand(const Tensor& tensor);
// Where a kernel writes `destination`: itself when its rows are 16-byte aligned, else a
// dense WORKSPACE tensor that finish_aligned_result copies back.
Tensor aligned_result(const Tensor& destination);
void finish_aligned_result(const Tensor& written, const Tensor& destination);

HeadStrides head_strides(const Tensor& tensor);
// The 1-D grid of tiles x batch_heads blocks that block_tile walks.
dim3 attention_grid(int64_t tiles, int64_t batch_heads);
// Sets a kernel's dynamic shared-memory limit when it needs more than the default 48 KiB.
void allow_shared_memory(const void* kernel, int bytes);

}  // namespace mg::cuda::attention
