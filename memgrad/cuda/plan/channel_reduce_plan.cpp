// cuda/plan/channel_reduce_plan.cpp — the chunking of the per-channel reductions (see the
// header).
#include "memgrad/cuda/plan/channel_reduce_plan.h"

#include <algorithm>

namespace mg::cuda::channel_reduce {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int widest_vector(size_t element_size) { return static_cast<int>(16 / element_size); }

// How many whole rows of `channels` values a warp reads at once, with vectors of `width`
// channels: 1 when a row spans the warp's 32 vectors or more; 2 or 4 when 32 / rows_per_warp
// vectors cover a row exactly, with the widest vector only (the kernels are built for that
// case alone); 0 when neither fits.
int rows_per_warp(int64_t channels, int width, size_t element_size) {
  const int64_t lanes = channels / width;
  if (lanes >= kTileChannels || lanes == 0) return 1;
  if (width != widest_vector(element_size) || kTileChannels % lanes != 0) return 0;
  const auto rows = static_cast<int>(kTileChannels / lanes);
  return rows <= kMaxRowsPerWarp ? rows : 0;
}

// The widest vector of adjacent channels (16 bytes at most) that divides C, is aligned at
// every row start, and suits a warp (above).
// NOTE: before warps shared rows, C = 64 in float16 took 2 channels a thread (4-byte reads)
// and its reductions ran at about 2.4 TB/s on an H200.
int channel_vector_width(int64_t channels, size_t element_size, size_t alignment) {
  int width = widest_vector(element_size);
  while (width > 1 && (channels % width != 0 || element_size * width > alignment ||
                       rows_per_warp(channels, width, element_size) == 0)) {
    width /= 2;
  }
  return width;
}

}  // namespace

ChannelExtent channel_extent(const Tensor& input) {
  int64_t inner = 1;
  for (int d = 2; d < input.dim(); ++d) inner *= input.sizes()[d];
  const bool rows = inner == 1 || !input.is_contiguous();
  return {.channels = input.sizes()[1], .per_channel = input.sizes()[0] * inner, .inner = rows ? 1 : inner,
          .rows = rows};
}

ChunkPlan plan_chunks(const ChannelExtent& extent, size_t element_size, size_t alignment) {
  ChunkPlan plan{.channel_blocks = extent.channels, .chunks = 0, .chunk_size = 0, .channel_vector = 1,
                 .rows_per_warp = 1};
  int64_t values_per_block = kPlaneThreads * kMinValuesPerThread;
  if (extent.rows) {
    plan.channel_vector = channel_vector_width(extent.channels, element_size, alignment);
    // Width 1 is taken whatever the fit: a row then spans the warp, partly idle past C.
    plan.rows_per_warp = std::max(rows_per_warp(extent.channels, plan.channel_vector, element_size), 1);
    plan.channel_blocks = ceil_div(extent.channels, int64_t{kTileChannels / plan.rows_per_warp} * plan.channel_vector);
    values_per_block = kTileRows * plan.rows_per_warp * kMinValuesPerThread;  // rows per block at least
  }
  const int64_t wanted = ceil_div(kTargetBlocks, plan.channel_blocks);
  const int64_t chunks =
      std::clamp<int64_t>(std::min(wanted, ceil_div(extent.per_channel, values_per_block)), 1, kMaxChunks);
  plan.chunk_size = ceil_div(extent.per_channel, chunks);
  plan.chunks = ceil_div(extent.per_channel, plan.chunk_size);  // no empty chunk
  return plan;
}

}  // namespace mg::cuda::channel_reduce
