// cuda/kernels/multinomial.cu — cuda room: multinomial sampling of each row of a
// contiguous (rows, n) weight matrix, drawing what the CPU kernel draws from the same
// Philox state (the shared arithmetic is core/multinomial_draw.h).
//
// With replacement: one block per row writes the row's inclusive cumulative weights (in
// double, a block scan tile by tile) to a WORKSPACE buffer, then each thread
// binary-searches it for its draws. The scan adds in another order than the CPU's running
// sum, so a draw can differ only where u * total falls within rounding of a bucket edge.
// Without replacement: each category's key (one elementwise pass into a WORKSPACE
// buffer), then the top-k kernel picks the num_samples largest keys, largest first, ties
// (zero weights) by lower index, as the CPU's partial sort does.
#include <cub/block/block_scan.cuh>

#include "memgrad/core/factory.h"
#include "memgrad/core/multinomial_draw.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

constexpr int kScanThreads = 512;

// The first position in cumulative[0, n) whose value exceeds target, or n.
__device__ int64_t first_above(const double* cumulative, int64_t n, double target) {
  int64_t low = 0, high = n;
  while (low < high) {
    int64_t middle = (low + high) / 2;
    if (cumulative[middle] > target) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  return low;
}

// The first position whose cumulative weight reaches the total: the last positive weight.
__device__ int64_t last_positive(const double* cumulative, int64_t n) {
  int64_t low = 0, high = n - 1;
  while (low < high) {
    int64_t middle = (low + high) / 2;
    if (cumulative[middle] >= cumulative[n - 1]) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  return low;
}

template <class T>
__global__ void __launch_bounds__(kScanThreads)
    with_replacement_kernel(const T* weights, int64_t n, int64_t num_samples, PhiloxState rng, double* cumulative,
                            int64_t* samples) {
  using BlockScan = cub::BlockScan<double, kScanThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  const int64_t row = blockIdx.x;
  const T* row_weights = weights + row * n;
  double* row_cumulative = cumulative + row * n;  // (n)
  double carry = 0.0;
  for (int64_t tile = 0; tile < n; tile += kScanThreads) {
    int64_t j = tile + threadIdx.x;
    double weight = j < n ? to_compute<double>(row_weights[j]) : 0.0;
    double inclusive, tile_total;
    BlockScan(scan_storage).InclusiveSum(weight, inclusive, tile_total);
    if (j < n) row_cumulative[j] = carry + inclusive;
    carry += tile_total;
    __syncthreads();  // scan_storage is reused; the last one also publishes row_cumulative
  }
  const double total = row_cumulative[n - 1];
  for (int64_t s = threadIdx.x; s < num_samples; s += kScanThreads) {
    double u = multinomial_uniform(rng, static_cast<uint64_t>(row * num_samples + s));
    int64_t category = first_above(row_cumulative, n, u * total);
    // NOTE: u * total may round up to total; the draw then falls in the last positive weight.
    if (category == n) category = last_positive(row_cumulative, n);
    samples[row * num_samples + s] = category;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    key_kernel(const T* weights, int64_t count, PhiloxState rng, double* keys) {
  for (int64_t i = global_thread_index(); i < count; i += grid_stride()) {
    // Category j of row r reads block r * n + j: the element's flat position.
    keys[i] = multinomial_key(rng, static_cast<uint64_t>(i), to_compute<double>(weights[i]));
  }
}

}  // namespace

void multinomial(const Tensor& probs, int64_t num_samples, bool replacement, PhiloxState rng,
                 const Tensor& output) {
  DeviceGuard guard(probs.device());  // kernels launch on the current device
  MG_ASSERT(probs.is_contiguous() && output.is_contiguous(), "multinomial expects contiguous tensors");
  const int64_t n = probs.sizes().back();
  const int64_t rows = probs.numel() / n;
  if (rows == 0 || num_samples == 0) return;
  cudaStream_t stream = current_stream(probs.device());
  TensorOptions workspace_options{.dtype = DType::Float64, .device = probs.device(),
                                  .category = MemoryCategory::Workspace};
  dispatch_floating(probs.dtype(), "multinomial", [&]<class HostT>() {
    if (replacement) {
      MG_CHECK(rows <= INT32_MAX, "multinomial: ", rows, " rows are more than the CUDA kernel takes (2^31 - 1)");
      Tensor cumulative = empty({rows, n}, workspace_options);  // (rows, n)
      with_replacement_kernel<<<static_cast<unsigned>(rows), kScanThreads, 0, stream>>>(
          device_data<HostT>(probs), n, num_samples, rng, cumulative.data_ptr<double>(),
          output.data_ptr<int64_t>());
      MG_CUDA_CHECK_LAUNCH();
      return;
    }
    Tensor keys = empty({rows, n}, workspace_options);                  // (rows, n)
    Tensor top_keys = empty({rows, num_samples}, workspace_options);    // (rows, num_samples)
    LaunchConfig config = launch_config(rows * n);
    key_kernel<<<config.blocks, config.threads, 0, stream>>>(device_data<HostT>(probs), rows * n, rng,
                                                            keys.data_ptr<double>());
    MG_CUDA_CHECK_LAUNCH();
    topk(keys, num_samples, /*largest=*/true, top_keys, output);
  });
}

}  // namespace mg::cuda
