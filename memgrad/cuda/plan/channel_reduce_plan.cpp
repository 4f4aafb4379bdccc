// cuda/plan/channel_reduce_plan.cpp — the chunking of the per-channel reductions (see the
// header).
#include "memgrad/cuda/plan/channel_reduce_plan.h"

#include <algorithm>

namespace mg::cuda::channel_reduce {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether a row of `channels` values is read by `lanes` threads of `width` channels each,
// with a warp reading whole rows: one row spans the warp's 32 vectors or more, or an exact
// divisor of them (a warp then reads 32 / lanes rows at once).
bool rows_fit_warp(int64_t channels, int width) {
  const int64_t lanes = channels / width;
  return lanes >= kTileChannels || kTileChannels % lanes == 0;
}

// The widest vector of adjacent channels (16 bytes at most) that divides C, is aligned at
// every row start, and lets a warp read whole rows.
// NOTE: before rows narrower than a warp existed, C = 64 in float16 took 2 channels a
// thread (4-byte reads) and its reductions ran at about 2.4 TB/s on an H200.
int channel_vector_width(int64_t channels, size_t element_size, size_t alignment) {
  int width = static_cast<int>(16 / element_size);
  while (width > 1 && (channels % width != 0 || element_size * width > alignment || !rows_fit_warp(channels, width))) {
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
  ChunkPlan plan{.channel_blocks = extent.channels, .chunks = 0, .chunk_size = 0, .channel_vector = 1, .row_lanes = 1};
  int64_t values_per_block = kPlaneThreads * kMinValuesPerThread;
  if (extent.rows) {
    plan.channel_vector = channel_vector_width(extent.channels, element_size, alignment);
    const int64_t lanes = extent.channels / plan.channel_vector;
    plan.row_lanes = rows_fit_warp(extent.channels, plan.channel_vector) && lanes < kTileChannels
                         ? static_cast<int>(lanes)
                         : kTileChannels;
    plan.channel_blocks = ceil_div(extent.channels, int64_t{plan.row_lanes} * plan.channel_vector);
    // rows per block at least: kTileRows x (rows a warp reads at once) x kMinValuesPerThread
    values_per_block = kTileRows * (kTileChannels / plan.row_lanes) * kMinValuesPerThread;
  }
  const int64_t wanted = ceil_div(kTargetBlocks, plan.channel_blocks);
  const int64_t chunks =
      std::clamp<int64_t>(std::min(wanted, ceil_div(extent.per_channel, values_per_block)), 1, kMaxChunks);
  plan.chunk_size = ceil_div(extent.per_channel, chunks);
  plan.chunks = ceil_div(extent.per_channel, plan.chunk_size);  // no empty chunk
  return plan;
}

}  // namespace mg::cuda::channel_reduce
