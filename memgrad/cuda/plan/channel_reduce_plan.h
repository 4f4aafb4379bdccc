// cuda/plan/channel_reduce_plan.h — how the per-channel reductions of
// cuda/kernels/channel_reduce.cuh (batch normalisation's statistics and backward sums)
// split each channel's values among blocks: where the values lie (ChannelExtent), how many
// adjacent channels a thread reads at once in the rows layout, and how many chunks each
// channel is cut into, which sets the 2 x chunks x C partial sums a caller borrows.
//
// Host arithmetic only, with no CUDA header, built in every build: the kernels' launches
// and the memory predictor (memory/cuda_scratch_model.cpp) call the same functions, so a
// predicted workspace is the one a GPU run allocates.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memgrad/core/tensor.h"

namespace mg::cuda::channel_reduce {

constexpr int kPlaneThreads = 256;                // planes: a 1-D block on one channel
constexpr int kTileChannels = 32, kTileRows = 8;  // rows: 32 threads (channel vectors) x 8 rows
// NOTE: about 8 resident 256-thread blocks on each of an H200's 132 SMs; a smaller GPU
// runs the grid in more waves. Chunks never get so short that a thread reads fewer than
// about 8 values (the partials would then cost more than they save).
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinValuesPerThread = 8;
constexpr int64_t kMaxChunks = 1024;  // keeps the partials (2 x chunks x C) small
constexpr int kMaxRowsPerWarp = 4;    // rows narrower than 8 vectors take narrower vectors

// Where a channel's values lie in an (N, C, ...) input dense in NCHW or channels-last order.
struct ChannelExtent {
  int64_t channels;
  int64_t per_channel;  // N * H * W values per channel
  int64_t inner;        // planes: H * W values per run; rows: 1
  bool rows;            // the rows layout: channels-last, or (N, C)
};

ChannelExtent channel_extent(const Tensor& input);

// How the partial-sum kernels cut the work; chunk k of a channel covers its values
// [k * chunk_size, (k + 1) * chunk_size), and no chunk is empty.
struct ChunkPlan {
  int64_t channel_blocks;  // blocks across the channels (rows: tiles of 32 channel vectors)
  int64_t chunks;          // blocks along each channel's values
  int64_t chunk_size;
  int channel_vector;      // rows: adjacent channels per thread (1, 2, 4 or 8); planes: 1
  int rows_per_warp;       // rows: whole rows a warp reads at once (1, or 2 or 4 when a row
                           // is narrower than 32 vectors: 32 / rows_per_warp threads a row); planes: 1
};

// The plan for elements of `element_size` bytes whose data pointers are all aligned to
// `alignment` bytes (the largest power of two up to 16 dividing each).
ChunkPlan plan_chunks(const ChannelExtent& extent, size_t element_size, size_t alignment);

}  // namespace mg::cuda::channel_reduce
