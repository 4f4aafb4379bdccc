// cuda/kernels/embedding.cu — CUDA embedding lookup and its weight gradient.
//
// Forward: a warp per looked-up row copies the table's row in 16-byte vectors when the
// rows allow it. An index outside [0, V) is not read: its output row is written as zeros
// and the kernel records the error in the device's record (cuda/device_error.h), which the
// host raises at its next synchronisation, so no host check and no wait are needed.
//
// Backward: a warp per position adds the incoming gradient's row into the weight's
// gradient with atomicAdd (float32 and float64 tables directly). NOTE: a 16-bit table's
// rows are summed in a float32 scratch table (WORKSPACE, 4 bytes per entry of the table)
// and converted once at the end: a 16-bit atomicAdd would round after every add, and a
// row looked up thousands of times (a frequent token, a position embedding) would lose
// its small contributions. The order of the adds varies from run to run, so this result is
// not bitwise deterministic (the CPU's is).
//
// Deterministic backward (set_deterministic_algorithms): the indices are sorted with their
// positions (CUB's radix sort, which is stable), and a warp per run of one row in the
// sorted order sums that row's incoming gradients in position order and adds the sum into
// the gradient once; no atomics, no float32 table for 16-bit tables. A row looked up in
// many positions is summed by one warp alone, so this is slower where the lookups are
// skewed. Scratch: three int64 arrays of the positions and CUB's buffer, all WORKSPACE.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cub/device/device_radix_sort.cuh>
#include <type_traits>

#include "memgrad/core/determinism.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/device_error.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

// A warp per row, kRowsPerBlock rows per block.
constexpr int kRowsPerBlock = 8;

LaunchConfig rows_launch(int64_t count) {
  int64_t blocks = std::min<int64_t>((count + kRowsPerBlock - 1) / kRowsPerBlock, kMaxBlocks);
  return {static_cast<unsigned>(std::max<int64_t>(blocks, 1)), 32};
}

template <int kVec, class T>
__global__ void embedding_kernel(const T* table, const int64_t* indices, int64_t count, int64_t table_rows,
                                 int64_t row_size, T* output, DeviceErrorRecord* errors) {
  using Vector = AlignedVector<T, kVec>;
  const int64_t vectors = row_size / kVec;
  for (int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; n < count;
       n += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t row = indices[n];
    Vector* out = reinterpret_cast<Vector*>(output + n * row_size);
    if (row >= 0 && row < table_rows) {
      const Vector* source = reinterpret_cast<const Vector*>(table + row * row_size);
      for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) out[v] = source[v];
    } else {
      Vector zero_vector;
#pragma unroll
      for (int j = 0; j < kVec; ++j) zero_vector.value[j] = from_compute<T>(0.0f);
      for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) out[v] = zero_vector;
      if (threadIdx.x == 0) {
        report_device_error(errors, DeviceErrorCode::EmbeddingIndexOutOfRange, row, table_rows, n, row_size);
      }
    }
  }
}

// Sum is float for float32 and 16-bit gradients, double for float64.
template <class T, class Sum>
__global__ void embedding_backward_kernel(const T* grad_output, const int64_t* indices, int64_t count,
                                          int64_t table_rows, int64_t row_size, int64_t padding_idx, Sum* sums) {
  for (int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; n < count;
       n += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t row = indices[n];
    // Out-of-range rows were reported by the forward; padding gets no gradient.
    if (row == padding_idx || row < 0 || row >= table_rows) continue;
    const T* grad = grad_output + n * row_size;
    Sum* destination = sums + row * row_size;
    for (int64_t d = threadIdx.x; d < row_size; d += blockDim.x) atomicAdd(destination + d, to_compute<Sum>(grad[d]));
  }
}

__global__ void iota_kernel(int64_t count, int64_t* values) {
  for (int64_t i = global_thread_index(); i < count; i += grid_stride()) values[i] = i;
}

// The deterministic backward's sum: a warp per sorted entry that starts a run of one row
// (`sorted_rows` ascending, `positions` in position order within a run).
template <class T, class Sum>
__global__ void embedding_backward_sorted_kernel(const T* grad_output, const int64_t* sorted_rows,
                                                 const int64_t* positions, int64_t count, int64_t table_rows,
                                                 int64_t row_size, int64_t padding_idx, T* grad_weight) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t row = sorted_rows[i];
    if (i > 0 && sorted_rows[i - 1] == row) continue;  // inside a run another warp sums
    if (row == padding_idx || row < 0 || row >= table_rows) continue;
    int64_t end = i + 1;
    while (end < count && sorted_rows[end] == row) ++end;
    T* destination = grad_weight + row * row_size;
    for (int64_t d = threadIdx.x; d < row_size; d += blockDim.x) {
      Sum sum = 0;
      for (int64_t j = i; j < end; ++j) sum += to_compute<Sum>(grad_output[positions[j] * row_size + d]);
      destination[d] = from_compute<T>(to_compute<Sum>(destination[d]) + sum);
    }
  }
}

// The deterministic backward: sort, then sum each run (see the file's comment).
template <class T>
void embedding_backward_sorted(const T* grad, const int64_t* rows, int64_t count, int64_t table_rows,
                               int64_t row_size, int64_t padding_idx, T* grad_weight, Device device,
                               cudaStream_t stream) {
  MG_CHECK(count <= INT_MAX, "embedding backward: ", count,
           " looked-up positions are more than the deterministic backward's sort takes (2^31 - 1). Hint: "
           "set_deterministic_algorithms(false), or fewer positions per step.");
  const TensorOptions scratch{.dtype = DType::Int64, .device = device, .category = MemoryCategory::Workspace};
  // Freed on this stream once the kernels are queued: the caching allocator orders their reuse.
  Tensor sorted_rows = empty({count}, scratch), positions = empty({count}, scratch),
         sorted_positions = empty({count}, scratch);
  LaunchConfig fill = launch_config(count);
  iota_kernel<<<fill.blocks, fill.threads, 0, stream>>>(count, positions.data_ptr<int64_t>());
  MG_CUDA_CHECK_LAUNCH();
  size_t sort_bytes = 0;
  MG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, rows, sorted_rows.data_ptr<int64_t>(),
                                                positions.data_ptr<int64_t>(), sorted_positions.data_ptr<int64_t>(),
                                                static_cast<int>(count), 0, 64, stream));
  Tensor sort_scratch = empty({static_cast<int64_t>(std::max<size_t>(sort_bytes, 1))},
                              {.dtype = DType::UInt8, .device = device, .category = MemoryCategory::Workspace});
  MG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_scratch.raw_data(), sort_bytes, rows,
                                                sorted_rows.data_ptr<int64_t>(), positions.data_ptr<int64_t>(),
                                                sorted_positions.data_ptr<int64_t>(), static_cast<int>(count), 0, 64,
                                                stream));
  using Sum = std::conditional_t<std::is_same_v<T, double>, double, float>;
  LaunchConfig config = rows_launch(count);
  embedding_backward_sorted_kernel<T, Sum><<<config.blocks, dim3(config.threads, kRowsPerBlock), 0, stream>>>(
      grad, sorted_rows.data_ptr<int64_t>(), sorted_positions.data_ptr<int64_t>(), count, table_rows, row_size,
      padding_idx, grad_weight);
  MG_CUDA_CHECK_LAUNCH();
}

// grad_weight += sums, element by element (the 16-bit tables' last step).
template <class T>
__global__ void add_float_sums_kernel(const float* sums, int64_t total, T* grad_weight) {
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    grad_weight[i] = from_compute<T>(to_compute<float>(grad_weight[i]) + sums[i]);
  }
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& indices, const Tensor& output) {
  const int64_t count = indices.numel(), table_rows = weight.sizes()[0], row_size = weight.sizes()[1];
  if (count == 0 || row_size == 0) return;
  Device device = weight.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  DeviceErrorRecord* errors = device_error_record(device);
  dispatch_floating(weight.dtype(), "embedding", [&]<class Element>() {
    using T = device_t<Element>;
    constexpr int kVec = vector_width_v<T>;
    const T* table = device_data<Element>(weight);
    T* out = device_data<Element>(output);
    const int64_t* rows = indices.data_ptr<int64_t>();
    LaunchConfig config = rows_launch(count);
    dim3 block(config.threads, kRowsPerBlock);
    if (row_size % kVec == 0 && is_aligned(table, 16) && is_aligned(out, 16)) {
      embedding_kernel<kVec><<<config.blocks, block, 0, stream>>>(table, rows, count, table_rows, row_size, out, errors);
    } else {
      embedding_kernel<1><<<config.blocks, block, 0, stream>>>(table, rows, count, table_rows, row_size, out, errors);
    }
    MG_CUDA_CHECK_LAUNCH();
  });
}

void embedding_backward(const Tensor& grad_output, const Tensor& indices, int64_t padding_idx,
                        const Tensor& grad_weight) {
  const int64_t count = indices.numel(), table_rows = grad_weight.sizes()[0], row_size = grad_weight.sizes()[1];
  if (count == 0 || row_size == 0) return;
  Device device = grad_weight.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  LaunchConfig config = rows_launch(count);
  dim3 block(config.threads, kRowsPerBlock);
  const int64_t* rows = indices.data_ptr<int64_t>();
  dispatch_floating(grad_weight.dtype(), "embedding backward", [&]<class Element>() {
    using T = device_t<Element>;
    const T* grad = device_data<Element>(grad_output);
    if (deterministic_algorithms()) {
      embedding_backward_sorted(grad, rows, count, table_rows, row_size, padding_idx, device_data<Element>(grad_weight),
                                device, stream);
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      embedding_backward_kernel<<<config.blocks, block, 0, stream>>>(grad, rows, count, table_rows, row_size,
                                                                     padding_idx, device_data<Element>(grad_weight));
      MG_CUDA_CHECK_LAUNCH();
    } else {
      // Freed on this stream once the kernels are queued: the caching allocator orders its reuse.
      Tensor sums = zeros({table_rows, row_size},
                          {.dtype = DType::Float32, .device = device, .category = MemoryCategory::Workspace});
      float* scratch = sums.data_ptr<float>();
      embedding_backward_kernel<<<config.blocks, block, 0, stream>>>(grad, rows, count, table_rows, row_size,
                                                                     padding_idx, scratch);
      MG_CUDA_CHECK_LAUNCH();
      LaunchConfig add = launch_config(sums.numel());
      add_float_sums_kernel<<<add.blocks, add.threads, 0, stream>>>(scratch, sums.numel(),
                                                                   device_data<Element>(grad_weight));
      MG_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace mg::cuda
