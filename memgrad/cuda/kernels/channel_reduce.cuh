// cuda/kernels/channel_reduce.cuh — per-channel sums over an (N, C, ...) tensor dense in
// NCHW or channels-last order, with many blocks per channel: the reduction machinery of
// batch normalisation (cuda/kernels/batch_norm.cu), kept apart from what it sums.
//
// Where a channel's values lie (Geometry):
//   planes: NCHW with H * W > 1. Channel c is N runs of H * W contiguous values; a block
//     walks a chunk of one channel's N * H * W values, consecutive threads on consecutive
//     addresses.
//   rows: channels-last, and (N, C). The input is N * H * W rows of C contiguous values; a
//     block is 32 threads x 8 rows, each thread takes a vector of 1 to 16 bytes' worth of
//     adjacent channels, so a warp reads up to 512 contiguous bytes: of one row, or of 2 or
//     4 whole rows when a row is narrower (C = 64 in float16: 8 threads of 8 channels a
//     row, 4 rows a warp), and each thread loops down the rows of its chunk.
//
// reduce_channels runs two launches: a 2-D grid of (chunk, channel) blocks writes one pair
// of partial sums per block to a workspace, so that many blocks share a channel (64
// channels of 262,144 values would otherwise occupy 64 of an H200's 132 SMs), then a small
// kernel adds each channel's partials in a fixed order (deterministic, no atomics) and hands
// the two totals to a Finish functor, on the device: Finish::load(c) fetches what it reads
// besides the sums (issued early, see finish_kernel), operator()(c, loaded, first, second)
// finishes.
//
// How many chunks each channel is cut into, and so how large the caller's workspace is, is
// host arithmetic that the memory predictor asks too: cuda/plan/channel_reduce_plan.h.
//
// What is summed is a Terms functor: per channel prepare(geometry, c) once (a
// Terms::Prepared), then add<kVec>(prepared, at, first, second) for each group of kVec
// values at offsets at, at + 1, ... of the tensors the Terms reads (kVec adjacent channels
// of one row, each with its own prepared value and sums, in the rows layout; kVec = 1 in the
// planes layout). The Terms loads what it needs there (load_vector), and may store a result
// of the same shape at the same offsets (store_vector): every offset is visited exactly
// once, so a pass that sums can also write, which saves the pass after it a read.
// Terms::Element is the element type of those tensors, whose data pointers the caller
// hands to partial_grid (they decide the widest vector the rows layout may use).
#pragma once

#include <algorithm>
#include <initializer_list>

#include "memgrad/core/tensor.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/dependent_launch.cuh"
#include "memgrad/cuda/kernels/row_reduce.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/plan/channel_reduce_plan.h"

namespace mg::cuda::channel_reduce {

struct SumOf {
  template <class A>
  __device__ __forceinline__ A operator()(A total, A value) const { return total + value; }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- geometry ----

// A ChannelExtent (where the values lie) with what the kernels need to find them fast.
struct Geometry : ChannelExtent {
  bool narrow;                 // numel < 2^31: indices divide in 32 bits
  IntDivider inner_divider;    // of inner, valid when narrow
  IntDivider channel_divider;  // of channels, valid when narrow

  // Offset of the j-th value (j < per_channel) of channel c.
  __device__ __forceinline__ int64_t offset(int64_t c, int64_t j) const {
    if (rows) return j * channels + c;
    int64_t n = narrow ? inner_divider.divide(static_cast<uint32_t>(j)) : j / inner;
    return (n * channels + c) * inner + (j - n * inner);
  }

  // The channel of the element at `offset`.
  __device__ __forceinline__ int64_t channel_at(int64_t offset) const {
    int64_t run = rows ? offset : (narrow ? inner_divider.divide(static_cast<uint32_t>(offset)) : offset / inner);
    int64_t quotient = narrow ? channel_divider.divide(static_cast<uint32_t>(run)) : run / channels;
    return run - quotient * channels;
  }
};

// The caller passes an input dense in NCHW or channels-last order (autograd/norm.cpp).
inline Geometry geometry_of(const Tensor& input) {
  Geometry geometry{};
  static_cast<ChannelExtent&>(geometry) = channel_extent(input);
  geometry.narrow = input.numel() <= INT32_MAX;
  if (geometry.narrow) {
    geometry.inner_divider = IntDivider(static_cast<uint32_t>(std::max<int64_t>(geometry.inner, 1)));
    geometry.channel_divider = IntDivider(static_cast<uint32_t>(std::max<int64_t>(geometry.channels, 1)));
  }
  return geometry;
}

// The largest power of two up to 16 that divides every address (null ones are ignored).
inline size_t alignment_of(std::initializer_list<const void*> addresses) {
  uintptr_t bits = 0;
  for (const void* address : addresses) bits |= reinterpret_cast<uintptr_t>(address);
  size_t alignment = 16;
  while (alignment > 1 && bits % alignment != 0) alignment /= 2;
  return alignment;
}

// The grid of the partial-sum kernels: plan_chunks's chunks along x, its channel blocks
// along y. In the rows layout each thread takes `channel_vector` adjacent channels, and a
// warp `rows_per_warp` rows.
struct PartialGrid {
  dim3 blocks, threads;
  int64_t chunks, chunk_size;
  int channel_vector = 1;
  int rows_per_warp = 1;
};

// For elements of `element_size` bytes read from, or written to, the tensors at `data`.
inline PartialGrid partial_grid(const Geometry& geometry, size_t element_size,
                                std::initializer_list<const void*> data) {
  const ChunkPlan plan = plan_chunks(geometry, element_size, alignment_of(data));
  PartialGrid grid;
  grid.chunks = plan.chunks;
  grid.chunk_size = plan.chunk_size;
  grid.channel_vector = plan.channel_vector;
  grid.rows_per_warp = plan.rows_per_warp;
  grid.threads = geometry.rows ? dim3(kTileChannels, kTileRows) : dim3(kPlaneThreads);
  // Channels beyond gridDim.y (65535) are taken by a loop in the kernels.
  grid.blocks =
      dim3(static_cast<unsigned>(grid.chunks), static_cast<unsigned>(std::min<int64_t>(plan.channel_blocks, 65535)));
  return grid;
}

// ---- the two launches ----

// kVec adjacent values from data + at (aligned).
template <int kVec, class T>
__device__ __forceinline__ AlignedVector<T, kVec> load_vector(const T* data, int64_t at) {
  return *reinterpret_cast<const AlignedVector<T, kVec>*>(data + at);
}

// ... and to data + at.
template <int kVec, class T>
__device__ __forceinline__ void store_vector(T* data, int64_t at, const AlignedVector<T, kVec>& values) {
  *reinterpret_cast<AlignedVector<T, kVec>*>(data + at) = values;
}

// partials[0][chunk][c] and partials[1][chunk][c]: the two sums of Terms over a chunk of a
// channel (planes layout: blockIdx.y picks the channel).
template <class A, class Terms>
__global__ void __launch_bounds__(kPlaneThreads)
    partial_sums_planes_kernel(Terms terms, Geometry geometry, int64_t chunk_size, A* partials) {
  wait_for_previous_kernel();
  int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk_size;
  int64_t end = min(begin + chunk_size, geometry.per_channel);
  int64_t chunks = gridDim.x;
  for (int64_t c = blockIdx.y; c < geometry.channels; c += gridDim.y) {
    typename Terms::Prepared prepared[1] = {terms.prepare(geometry, c)};
    A first[1] = {0}, second[1] = {0};
#pragma unroll 4
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
      terms.template add<1>(prepared, geometry.offset(c, j), first, second);
    }
    A total_first = reduce_across_row(first[0], SumOf{});
    A total_second = reduce_across_row(second[0], SumOf{});
    if (threadIdx.x == 0) {
      partials[blockIdx.x * geometry.channels + c] = total_first;
      partials[(chunks + blockIdx.x) * geometry.channels + c] = total_second;
    }
  }
}

// The same for the rows layout: a block takes (32 / kRowsPerWarp) * kVec channels
// (blockIdx.y picks which) of a chunk of rows; a thread takes kVec adjacent channels, one
// vector access a tensor, and a warp kRowsPerWarp rows at a time.
// NOTE: kRowsPerWarp is a template argument because the row loop's step must be a constant:
// as a run-time value nvcc kept fewer loads in flight, and the C >= 256 reductions of
// ResNet-50 ran 20-35% slower on an H200.
template <int kVec, int kRowsPerWarp, class A, class Terms>
__global__ void __launch_bounds__(kTileChannels * kTileRows)
    partial_sums_rows_kernel(Terms terms, Geometry geometry, int64_t chunk_size, A* partials) {
  constexpr int kSlots = kTileChannels * kVec;  // the values a row of the block's threads holds
  static_assert(kSlots <= kTileChannels * kTileRows, "one thread per channel finishes a tile");
  constexpr int kRowLanes = kTileChannels / kRowsPerWarp;  // threads across a row
  constexpr int kTileChannelCount = kRowLanes * kVec;
  __shared__ A shared_first[kTileRows][kSlots];
  __shared__ A shared_second[kTileRows][kSlots];
  wait_for_previous_kernel();
  int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk_size;
  int64_t end = min(begin + chunk_size, geometry.per_channel);
  int64_t chunks = gridDim.x;
  for (int64_t tile = blockIdx.y; tile * kTileChannelCount < geometry.channels; tile += gridDim.y) {
    // C % kVec == 0: all kVec exist
    int64_t first_channel = tile * kTileChannelCount + static_cast<int64_t>(threadIdx.x % kRowLanes) * kVec;
    A first[kVec] = {}, second[kVec] = {};
    if (first_channel < geometry.channels) {
      typename Terms::Prepared prepared[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) prepared[j] = terms.prepare(geometry, first_channel + j);
#pragma unroll 4
      for (int64_t row = begin + threadIdx.y * kRowsPerWarp + threadIdx.x / kRowLanes; row < end;
           row += kTileRows * kRowsPerWarp) {
        terms.template add<kVec>(prepared, row * geometry.channels + first_channel, first, second);
      }
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      shared_first[threadIdx.y][threadIdx.x * kVec + j] = first[j];
      shared_second[threadIdx.y][threadIdx.x * kVec + j] = second[j];
    }
    __syncthreads();
    // One thread per channel of the tile adds its slots: thread x of a block row holds
    // channel (x % kRowLanes) * kVec + j of the tile at slot x * kVec + j.
    int lane = threadIdx.y * kTileChannels + threadIdx.x;
    int64_t c = tile * kTileChannelCount + lane;
    if (lane < kTileChannelCount && c < geometry.channels) {
      A total_first = 0, total_second = 0;
      for (int r = 0; r < kTileRows; ++r) {
#pragma unroll
        for (int g = 0; g < kRowsPerWarp; ++g) {
          total_first += shared_first[r][g * kTileChannelCount + lane];
          total_second += shared_second[r][g * kTileChannelCount + lane];
        }
      }
      partials[blockIdx.x * geometry.channels + c] = total_first;
      partials[(chunks + blockIdx.x) * geometry.channels + c] = total_second;
    }
    __syncthreads();  // the shared sums are rewritten by the next tile
  }
}

// Adds each channel's partials and hands the two totals to finish(c, loaded, first, second),
// where loaded = finish.load(c) holds what the Finish reads besides the sums. A block takes
// 8 adjacent channels (one 32-byte sector of float partials per chunk) x blockDim.y lanes
// along the chunks (finish_lanes), each lane summing every blockDim.y-th chunk, then the
// lanes meet in a tree: a fixed order, so deterministic, with no atomics.
// NOTE: this small grid is bound by latency, not bandwidth (it took 8-10 us on an H200 with
// 32 lanes a channel and C / 32 blocks, about 1 ms of a ResNet-50 step): hence up to 4
// chunks a lane, and finish.load issued before the partials are read, so that its reads
// (the running statistics, the weight, the bias) wait alongside them.
constexpr int kFinishChannels = 8, kFinishLanes = 128;

// Lanes a channel for `chunks` partials: 32 to 128, a power of two, at most 4 chunks a lane
// where 128 allow it (more lanes than that only add blocks and tree steps: with 128 lanes
// for ResNet-50's 98 chunks at C = 2048 the finish took 11 us).
inline unsigned finish_lanes(int64_t chunks) {
  unsigned lanes = 32;
  while (lanes < kFinishLanes && lanes * 4 < chunks) lanes *= 2;
  return lanes;
}

template <class A, class Finish>
__global__ void __launch_bounds__(kFinishChannels * kFinishLanes)
    finish_kernel(const A* partials, int64_t chunks, int64_t channels, Finish finish) {
  __shared__ A shared_first[kFinishLanes][kFinishChannels];
  __shared__ A shared_second[kFinishLanes][kFinishChannels];
  wait_for_previous_kernel();
  const int lane = threadIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kFinishChannels + threadIdx.x;
  const bool finishes = lane == 0 && c < channels;
  typename Finish::Loaded loaded{};
  if (finishes) loaded = finish.load(c);
  A first = 0, second = 0;
  if (c < channels) {
#pragma unroll 4
    for (int64_t chunk = lane; chunk < chunks; chunk += blockDim.y) {
      first += partials[chunk * channels + c];
      second += partials[(chunks + chunk) * channels + c];
    }
  }
  shared_first[lane][threadIdx.x] = first;
  shared_second[lane][threadIdx.x] = second;
  __syncthreads();
  for (int half = static_cast<int>(blockDim.y) / 2; half > 0; half /= 2) {
    if (lane < half) {
      shared_first[lane][threadIdx.x] += shared_first[lane + half][threadIdx.x];
      shared_second[lane][threadIdx.x] += shared_second[lane + half][threadIdx.x];
    }
    __syncthreads();
  }
  if (finishes) finish(c, loaded, shared_first[0][threadIdx.x], shared_second[0][threadIdx.x]);
}

// Launches the partial sums of `terms` and finish_kernel over them, each early
// (dependent_launch.cuh); `workspace` holds at least 2 * chunks * C values of A.
template <class A, class Terms, class Finish>
void reduce_channels(const Geometry& geometry, const PartialGrid& grid, Terms terms, Finish finish, A* workspace,
                     Device device, cudaStream_t stream) {
  if (geometry.rows) {
    constexpr int kWidest = vector_width_v<typename Terms::Element>;
    auto launch = [&]<int kVec, int kRowsPerWarp>() {
      launch_dependent(partial_sums_rows_kernel<kVec, kRowsPerWarp, A, Terms>, grid.blocks, grid.threads, 0, stream,
                       device, terms, geometry, grid.chunk_size, workspace);
    };
    // Warps share rows with the widest vector only (cuda/plan/channel_reduce_plan.cpp).
    auto launch_widest = [&] {
      switch (grid.rows_per_warp) {
        case 4: launch.template operator()<kWidest, 4>(); break;
        case 2: launch.template operator()<kWidest, 2>(); break;
        default: launch.template operator()<kWidest, 1>(); break;
      }
    };
    auto launch_narrower = [&]<int kVec>() {
      if constexpr (kVec < kWidest) launch.template operator()<kVec, 1>();
    };
    if (grid.channel_vector == kWidest) {
      launch_widest();
    } else {
      switch (grid.channel_vector) {
        case 4: launch_narrower.template operator()<4>(); break;
        case 2: launch_narrower.template operator()<2>(); break;
        default: launch_narrower.template operator()<1>(); break;
      }
    }
  } else {
    launch_dependent(partial_sums_planes_kernel<A, Terms>, grid.blocks, grid.threads, 0, stream, device, terms,
                     geometry, grid.chunk_size, workspace);
  }
  dim3 finish_threads(kFinishChannels, finish_lanes(grid.chunks));
  auto finish_blocks = static_cast<unsigned>(ceil_div(geometry.channels, kFinishChannels));
  launch_dependent(finish_kernel<A, Finish>, finish_blocks, finish_threads, 0, stream, device,
                   static_cast<const A*>(workspace), grid.chunks, geometry.channels, finish);
}

}  // namespace mg::cuda::channel_reduce
