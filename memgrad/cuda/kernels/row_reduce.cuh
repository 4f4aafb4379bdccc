// cuda/kernels/row_reduce.cuh — combining one value per thread across the threads that
// share a row: warp shuffles, then (for a block per row) shared memory. Used by the
// reductions and by softmax.
#pragma once

#include <cuda_runtime.h>

namespace mg::cuda {

// A value from the thread `lane_mask` lanes away; kernels with compound values add an
// overload for their type next to it (found when reduce_across_row is instantiated).
template <class T>
__device__ __forceinline__ T shuffle_xor(T value, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, value, lane_mask);
}

// Combines `value` over the blockDim.x threads that share a row (threadIdx.y); every
// one of them gets the result. blockDim.x is 32 (a warp per row, any blockDim.y) or a
// multiple of 32 up to 1024 with blockDim.y == 1 (a block per row).
template <class T, class Fn>
__device__ __forceinline__ T reduce_across_row(T value, Fn combine) {
  for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2) value = combine(value, shuffle_xor(value, lane_mask));
  if (blockDim.x == 32) return value;
  __shared__ T warp_totals[32];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) warp_totals[warp] = value;
  __syncthreads();
  value = warp_totals[0];
  for (int w = 1; w < warps; ++w) value = combine(value, warp_totals[w]);
  __syncthreads();  // the totals may be rewritten by a next call
  return value;
}

}  // namespace mg::cuda
