// cuda/plan/channel_reduce_plan.cpp — the chunking of the per-channel reductions (see the
// header).
#include "memgrad/cuda/plan/channel_reduce_plan.h"

#include <algorithm>

namespace mg::cuda::channel_reduce {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The widest vector of adjacent channels (16 bytes at most) that divides C, keeps a warp's
// 32 vectors within C, and is aligned at every row start.
int channel_vector_width(int64_t channels, size_t element_size, size_t alignment) {
  int width = static_cast<int>(16 / element_size);
  while (width > 1 && (channels % width != 0 || channels < kTileChannels * width || element_size * width > alignment)) {
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
  ChunkPlan plan{.channel_blocks = extent.channels, .chunks = 0, .chunk_size = 0, .channel_vector = 1};
  int64_t values_per_block = kPlaneThreads * kMinValuesPerThread;
  if (extent.rows) {
    plan.channel_vector = channel_vector_width(extent.channels, element_size, alignment);
    plan.channel_blocks = ceil_div(extent.channels, kTileChannels * plan.channel_vector);
    values_per_block = kTileRows * kMinValuesPerThread;  // rows per block at least
  }
  const int64_t wanted = ceil_div(kTargetBlocks, plan.channel_blocks);
  const int64_t chunks =
      std::clamp<int64_t>(std::min(wanted, ceil_div(extent.per_channel, values_per_block)), 1, kMaxChunks);
  plan.chunk_size = ceil_div(extent.per_channel, chunks);
  plan.chunks = ceil_div(extent.per_channel, plan.chunk_size);  // no empty chunk
  return plan;
}

}  // namespace mg::cuda::channel_reduce
