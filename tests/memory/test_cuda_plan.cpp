// tests/memory/test_cuda_plan.cpp — the CUDA kernels' host arithmetic (memgrad/cuda/plan/),
// which the kernels launch with and the memory predictor (memory/cuda_scratch_model.cpp)
// allocates by, checked on the CPU against values worked out by hand: batch norm's chunks
// and channel vectors in NCHW and channels-last for float32, float16 and float64, its
// workspace, fused attention's backward workspace, cuBLAS's workspace and the layout of a
// cuDNN convolution.
#include <catch2/catch.hpp>

#include <cstdint>

#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/core/tensor.h"
#include "memgrad/cuda/plan/attention_workspace.h"
#include "memgrad/cuda/plan/batch_norm_workspace.h"
#include "memgrad/cuda/plan/blas_workspace.h"
#include "memgrad/cuda/plan/channel_reduce_plan.h"
#include "memgrad/cuda/plan/conv_layout.h"

namespace {

using mg::Device;
using mg::DType;
using mg::MemoryFormat;
using mg::Tensor;
using mg::cuda::channel_reduce::ChunkPlan;

// Sizes and strides without memory: the plan reads nothing else.
const Device kSimulated = Device::simulated(10);

Tensor tensor_of(mg::Shape sizes, DType dtype, MemoryFormat layout = MemoryFormat::Contiguous) {
  return mg::empty(sizes, {.dtype = dtype, .device = kSimulated}, layout);
}

// The plan for `input` with 16-byte aligned data, unless told otherwise.
ChunkPlan chunks_of(const Tensor& input, size_t alignment = 16) {
  return mg::cuda::channel_reduce::plan_chunks(mg::cuda::channel_reduce::channel_extent(input), input.element_size(),
                                               alignment);
}

}  // namespace

TEST_CASE("channel reduce: NCHW takes a block row per channel and 16 chunks for 64 channels", "[memory]") {
  // planes: 64 channel blocks; 1024 / 64 = 16 wanted; 401,408 values / (256 x 8) = 196 allowed.
  const Tensor input = tensor_of({128, 64, 56, 56}, DType::Float32);
  const mg::cuda::channel_reduce::ChannelExtent extent = mg::cuda::channel_reduce::channel_extent(input);
  CHECK_FALSE(extent.rows);
  CHECK(extent.channels == 64);
  CHECK(extent.per_channel == 128 * 56 * 56);
  CHECK(extent.inner == 56 * 56);
  const ChunkPlan plan = chunks_of(input);
  CHECK(plan.channel_blocks == 64);
  CHECK(plan.chunks == 16);
  CHECK(plan.chunk_size == 25'088);
  CHECK(plan.channel_vector == 1);
  // 5 x 64 coefficients + 2 x 16 x 64 partial sums.
  CHECK(mg::cuda::batch_norm_workspace_elements(64, plan.chunks, /*with_partials=*/true) == 2'368);
  CHECK(mg::cuda::batch_norm_workspace_elements(64, plan.chunks, /*with_partials=*/false) == 320);

  // 32 values a channel: one chunk, whatever the 1024 blocks wanted.
  const ChunkPlan small = chunks_of(tensor_of({2, 3, 4, 4}, DType::Float32));
  CHECK(small.chunks == 1);
  CHECK(small.chunk_size == 32);
}

TEST_CASE("channel reduce: channels-last vectors are as wide as 16 bytes, C and alignment allow", "[memory]") {
  // C = 256 channels-last, 100,352 rows: float32 reads 4 channels a thread (2 tiles of 128),
  // float16 8 (1 tile of 256); 1024 blocks wanted, 100,352 / 64 = 1,568 allowed.
  const Tensor float32 = tensor_of({128, 256, 28, 28}, DType::Float32, MemoryFormat::ChannelsLast);
  CHECK(mg::cuda::channel_reduce::channel_extent(float32).rows);
  CHECK(mg::cuda::channel_reduce::channel_extent(float32).inner == 1);
  const ChunkPlan wide4 = chunks_of(float32);
  CHECK(wide4.channel_vector == 4);
  CHECK(wide4.channel_blocks == 2);
  CHECK(wide4.chunks == 512);
  CHECK(wide4.chunk_size == 196);
  CHECK(mg::cuda::batch_norm_workspace_elements(256, wide4.chunks, true) == 5 * 256 + 2 * 512 * 256);

  const Tensor float16 = tensor_of({128, 256, 28, 28}, DType::Float16, MemoryFormat::ChannelsLast);
  const ChunkPlan wide8 = chunks_of(float16);
  CHECK(wide8.channel_vector == 8);
  CHECK(wide8.channel_blocks == 1);
  CHECK(wide8.chunks == 1024);
  CHECK(wide8.chunk_size == 98);
  CHECK(wide8.rows_per_warp == 1);
  // Data aligned to 8 bytes only (a view): 4 halves a thread, as float32's 4 floats.
  const ChunkPlan aligned8 = chunks_of(float16, /*alignment=*/8);
  CHECK(aligned8.channel_vector == 4);
  CHECK(aligned8.chunks == 512);

  const ChunkPlan float64 = chunks_of(tensor_of({128, 256, 28, 28}, DType::Float64, MemoryFormat::ChannelsLast));
  CHECK(float64.channel_vector == 2);
  CHECK(float64.channel_blocks == 4);
  CHECK(float64.chunks == 256);


  // C = 64 is narrower than a warp's 32 vectors: 16-byte vectors still, and a warp reads
  // whole rows, 2 of them in float32 (16 threads a row) and 4 in float16 (8 threads).
  const ChunkPlan narrow = chunks_of(tensor_of({128, 64, 56, 56}, DType::Float32, MemoryFormat::ChannelsLast));
  CHECK(narrow.channel_vector == 4);
  CHECK(narrow.rows_per_warp == 2);
  CHECK(narrow.channel_blocks == 1);
  CHECK(narrow.chunks == 1024);
  CHECK(narrow.chunk_size == 392);
  const ChunkPlan narrow_half = chunks_of(tensor_of({128, 64, 56, 56}, DType::Float16, MemoryFormat::ChannelsLast));
  CHECK(narrow_half.channel_vector == 8);
  CHECK(narrow_half.rows_per_warp == 4);
  CHECK(narrow_half.channel_blocks == 1);
  // C = 96 in float16: 12 vectors of 8 would not divide a warp, 24 of 4 neither, 48 of 2 span it.
  const ChunkPlan uneven = chunks_of(tensor_of({8, 96, 4, 4}, DType::Float16, MemoryFormat::ChannelsLast));
  CHECK(uneven.channel_vector == 2);
  CHECK(uneven.rows_per_warp == 1);
  CHECK(uneven.channel_blocks == 2);
  // C = 16 in float16: 2 vectors of 8 would make 16 rows a warp (4 at most), and narrower
  // vectors never share rows: 1 channel a thread, a row spanning 16 of a warp's 32 threads.
  const ChunkPlan tiny = chunks_of(tensor_of({8, 16, 4, 4}, DType::Float16, MemoryFormat::ChannelsLast));
  CHECK(tiny.channel_vector == 1);
  CHECK(tiny.rows_per_warp == 1);
}

TEST_CASE("channel reduce: (N, C) inputs are rows, and no chunk is left empty", "[memory]") {
  // C = 10 divides by no vector wider than 1 that lets a warp read whole rows; 65,600 rows / 64 =
  // 1,025 chunks, clamped to 1,024 of ceil(65,600 / 1,024) = 65 rows, which 1,010 cover.
  const Tensor input = tensor_of({65'600, 10}, DType::Float32);
  CHECK(mg::cuda::channel_reduce::channel_extent(input).rows);
  const ChunkPlan plan = chunks_of(input);
  CHECK(plan.channel_vector == 1);
  CHECK(plan.rows_per_warp == 1);
  CHECK(plan.channel_blocks == 1);
  CHECK(plan.chunk_size == 65);
  CHECK(plan.chunks == 1'010);
}

TEST_CASE("batch norm accumulates in float64 for float64 and in float32 otherwise", "[memory]") {
  CHECK(mg::cuda::batch_norm_accumulate_dtype(DType::Float64) == DType::Float64);
  CHECK(mg::cuda::batch_norm_accumulate_dtype(DType::Float32) == DType::Float32);
  CHECK(mg::cuda::batch_norm_accumulate_dtype(DType::Float16) == DType::Float32);
  CHECK(mg::cuda::batch_norm_accumulate_dtype(DType::BFloat16) == DType::Float32);
}

TEST_CASE("attention backward: float32 borrows D alone, 16-bit dtypes the dQ accumulator too", "[memory]") {
  // q (2, 12, 1024, 64): 24,576 rows.
  const mg::Shape q_sizes{2, 12, 1024, 64};
  const auto workspace = [&](DType dtype, bool dropout = false, bool deterministic = false) {
    return mg::cuda::attention_backward_workspace(dtype, q_sizes, /*key_len=*/1024, dropout, deterministic);
  };
  const mg::cuda::AttentionBackwardWorkspace float32 = workspace(DType::Float32);
  CHECK(float32.grad_q_accumulator == 0);
  CHECK(float32.grad_q_slices == 0);
  CHECK(float32.delta == 24'576);
  CHECK(float32.elements() == 24'576);
  const mg::cuda::AttentionBackwardWorkspace bfloat16 = workspace(DType::BFloat16);
  CHECK(bfloat16.grad_q_accumulator == 24'576 * 64);
  CHECK(bfloat16.grad_q_slices == 1);
  CHECK(bfloat16.delta == 24'576);
  CHECK(bfloat16.elements() == 24'576 * 65);
  CHECK(workspace(DType::Float16).elements() == 24'576 * 65);
  CHECK(mg::cuda::kAttentionWorkspaceDType == DType::Float32);
}

TEST_CASE("attention backward, deterministic: one dQ slice per block of keys, in every dtype", "[memory]") {
  const mg::Shape q_sizes{2, 12, 1024, 64};
  const auto slices = [&](DType dtype, int64_t key_len, bool dropout) {
    return mg::cuda::attention_backward_workspace(dtype, q_sizes, key_len, dropout, /*deterministic=*/true)
        .grad_q_slices;
  };
  // The tensor-core kernel's blocks own 128 keys at head dim 64 without dropout, else 64.
  CHECK(mg::cuda::attention_backward_key_block(DType::BFloat16, 64, false) == 128);
  CHECK(mg::cuda::attention_backward_key_block(DType::BFloat16, 64, true) == 64);
  CHECK(mg::cuda::attention_backward_key_block(DType::Float16, 128, false) == 64);
  CHECK(mg::cuda::attention_backward_key_block(DType::Float32, 64, false) == 64);
  CHECK(slices(DType::BFloat16, 1024, false) == 8);
  CHECK(slices(DType::BFloat16, 1025, false) == 9);
  CHECK(slices(DType::BFloat16, 1024, true) == 16);
  CHECK(slices(DType::Float32, 1024, false) == 16);
  const mg::cuda::AttentionBackwardWorkspace float32 =
      mg::cuda::attention_backward_workspace(DType::Float32, q_sizes, 1024, false, true);
  CHECK(float32.grad_q_accumulator == 16 * 24'576 * 64);
  CHECK(float32.elements() == 16 * 24'576 * 64 + 24'576);
}

TEST_CASE("cuBLAS's workspace is 32 MiB from Hopper on, 8 MiB before, and a prediction assumes Hopper", "[memory]") {
  CHECK(mg::cuda::blas_workspace_bytes_for_capability(8) == 8u << 20);
  CHECK(mg::cuda::blas_workspace_bytes_for_capability(9) == 32u << 20);
  CHECK(mg::cuda::blas_workspace_bytes_for_capability(10) == 32u << 20);
  CHECK(mg::cuda::blas_workspace_bytes_for_capability(mg::cuda::kPredictedComputeCapabilityMajor) == 32u << 20);
}

TEST_CASE("a convolution runs channels-last when any tensor is, except in float64", "[memory]") {
  const Tensor nchw_input = tensor_of({8, 16, 32, 32}, DType::Float32);
  const Tensor nhwc_input = tensor_of({8, 16, 32, 32}, DType::Float32, MemoryFormat::ChannelsLast);
  const Tensor nchw_weight = tensor_of({32, 16, 3, 3}, DType::Float32);
  const Tensor nchw_output = tensor_of({8, 32, 32, 32}, DType::Float32);
  const Tensor nhwc_output = tensor_of({8, 32, 32, 32}, DType::Float32, MemoryFormat::ChannelsLast);

  CHECK(mg::cuda::conv_call_layout(DType::Float32, nchw_input, nchw_weight, nchw_output) == MemoryFormat::Contiguous);
  // One channels-last tensor makes the call channels-last; the NCHW weight is then copied.
  CHECK(mg::cuda::conv_call_layout(DType::Float32, nhwc_input, nchw_weight, nchw_output) ==
        MemoryFormat::ChannelsLast);
  CHECK(mg::cuda::conv_call_layout(DType::Float32, nchw_input, nchw_weight, nhwc_output) ==
        MemoryFormat::ChannelsLast);
  CHECK(mg::cuda::needs_layout_copy(nchw_weight, MemoryFormat::ChannelsLast));
  CHECK_FALSE(mg::cuda::needs_layout_copy(nhwc_input, MemoryFormat::ChannelsLast));
  CHECK_FALSE(mg::cuda::needs_layout_copy(nchw_weight, MemoryFormat::Contiguous));

  // float64 stays NCHW, so its channels-last input is the one copied.
  const Tensor nhwc_input64 = tensor_of({8, 16, 32, 32}, DType::Float64, MemoryFormat::ChannelsLast);
  CHECK(mg::cuda::conv_call_layout(DType::Float64, nhwc_input64, tensor_of({32, 16, 3, 3}, DType::Float64),
                                   tensor_of({8, 32, 32, 32}, DType::Float64)) == MemoryFormat::Contiguous);
  CHECK(mg::cuda::needs_layout_copy(nhwc_input64, MemoryFormat::Contiguous));
}
