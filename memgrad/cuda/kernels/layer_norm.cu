// cuda/kernels/layer_norm.cu — CUDA layer normalisation of each row of a (rows, cols)
// input, forward and backward.
//
// Forward: one kernel. A warp per row for short rows (up to 128 vectors of 16 bytes:
// cols <= 512 in float32, <= 1024 in 16-bit), else a block per row (up to 1024 threads,
// about 4 vectors each). Each thread reads its share of the row once, in 16-byte vectors
// when the rows allow it, and keeps the values in shared memory (in A, the accumulation
// type: float, or double for float64) in slots only it uses, so no barrier guards them;
// the mean and then the variance (the mean of squared deviations: two passes, no
// cancellation however large |mean| / std is) come from those values, and the output
// from them again. Rows whose cache would not fit in 48 KiB (cols above ~12k in float32)
// read the input again from global memory (L2) instead. With a residual (a pre-norm
// transformer's add), each thread adds its share of the residual as it loads the input,
// writes the sum once, and normalises the sum: the add costs no pass of its own.
//
// Backward: grad_input in one kernel of the same shape: per row, with xhat = (x - mean) *
// invstd and gw = g * w, dx = invstd * (gw - mean(gw) - xhat * mean(gw * xhat)), plus the
// gradient that reached the residual add's sum where there is one; xhat and gw are cached as
// above between the row's reduction and its writes. grad_weight =
// sum_rows g * xhat and grad_bias = sum_rows g are column sums: a first kernel sums tiles
// of 32 columns over chunks of rows into partial sums (A, WORKSPACE), a second adds the
// chunks of each column and writes the weight's dtype.
//
// weight and bias have the input's dtype, or float32 for a 16-bit input (W below); the
// statistics are A.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "memgrad/core/factory.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/row_reduce.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

template <class Element>
using accumulate_t = std::conditional_t<std::is_same_v<Element, double>, double, float>;

struct Sum {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return a + b;
  }
};

template <class A>
__device__ __forceinline__ A inverse_sqrt(A x) {
  if constexpr (std::is_same_v<A, double>) return ::rsqrt(x);
  else return ::rsqrtf(x);
}

// Value c of a weight or bias, or `fallback` when there is none.
template <class A, class W>
__device__ __forceinline__ A column_value(const W* values, int64_t c, A fallback) {
  return values == nullptr ? fallback : to_compute<A>(values[c]);
}

// ---- how the threads cover the rows, and the row cache ----

// Rows of at most this many vectors get a warp each.
constexpr int64_t kWarpRowVectors = 128;
// The row cache's budget: what every GPU gives a block without opting in.
constexpr size_t kMaxRowCacheBytes = 48 * 1024;

struct RowLaunch {
  dim3 block;           // (threads per row, rows per block)
  unsigned blocks;
  size_t shared_bytes;  // the row caches of a block; 0 when they would not fit
};

// `arrays` values of `value_bytes` cached per element of a row of `vectors` vectors of
// `vec` elements. Must agree with RowCache::per_row.
RowLaunch row_launch(int64_t rows, int64_t vectors, int vec, int arrays, size_t value_bytes) {
  RowLaunch launch;
  if (vectors <= kWarpRowVectors) {
    launch.block = dim3(32, 4);
  } else {
    int64_t threads = std::min<int64_t>(1024, ((vectors + 3) / 4 + 31) / 32 * 32);
    launch.block = dim3(static_cast<unsigned>(threads), 1);
  }
  int64_t rows_per_block = launch.block.y;
  launch.blocks = static_cast<unsigned>(std::clamp<int64_t>((rows + rows_per_block - 1) / rows_per_block, 1, 1 << 20));
  int64_t slots = (vectors + launch.block.x - 1) / launch.block.x * vec;  // per thread and array
  size_t bytes = static_cast<size_t>(slots) * launch.block.x * arrays * value_bytes * rows_per_block;
  launch.shared_bytes = bytes <= kMaxRowCacheBytes ? bytes : 0;
  return launch;
}

extern __shared__ __align__(16) unsigned char row_cache_bytes[];

// A thread's slots of its row's cache: slot s of array a sits at ((a * slots + s) * threads
// + thread), so a warp's accesses fall in 32 different banks. Slot s = k * kVec + j holds
// element j of the thread's k-th vector of the row.
template <class A>
struct RowCache {
  A* base;
  int64_t slots;
  bool enabled;

  __device__ static RowCache for_this_thread(int64_t vectors, int vec, int arrays, bool enabled) {
    int64_t slots = (vectors + blockDim.x - 1) / blockDim.x * vec;
    A* row = reinterpret_cast<A*>(row_cache_bytes) + threadIdx.y * slots * arrays * blockDim.x;
    return {row + threadIdx.x, slots, enabled};
  }
  __device__ __forceinline__ A& at(int array, int64_t slot) const { return base[(array * slots + slot) * blockDim.x]; }
};

// ---- forward ----

// residual and sum are null without a residual; R is then T.
template <int kVec, class T, class R, class W, class A>
__global__ void layer_norm_kernel(const T* input, const R* residual, const W* weight, const W* bias, int64_t rows,
                                  int64_t cols, A eps, bool cached, T* sum, T* output, A* save_mean, A* save_invstd) {
  using Vector = AlignedVector<T, kVec>;
  using ResidualVector = AlignedVector<R, kVec>;
  const int64_t vectors = cols / kVec;
  const RowCache<A> cache = RowCache<A>::for_this_thread(vectors, kVec, 1, cached);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    // The row normalised: the input's, or the sum this thread writes in the first loop and
    // reads back (its own elements) where the row is not cached.
    const T* x = (residual != nullptr ? sum : input) + row * cols;
    // The row's values, cached or read again.
    auto value = [&](int64_t v, int j, int64_t slot) {
      return cache.enabled ? cache.at(0, slot) : to_compute<A>(x[v * kVec + j]);
    };
    A total = 0;
    for (int64_t v = threadIdx.x, slot = 0; v < vectors; v += blockDim.x, slot += kVec) {
      Vector loaded = reinterpret_cast<const Vector*>(input + row * cols)[v];
      if (residual != nullptr) {
        const ResidualVector added = reinterpret_cast<const ResidualVector*>(residual + row * cols)[v];
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          loaded.value[j] = from_compute<T>(to_compute<A>(loaded.value[j]) + to_compute<A>(added.value[j]));
        }
        reinterpret_cast<Vector*>(sum + row * cols)[v] = loaded;
      }
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        A element = to_compute<A>(loaded.value[j]);
        total += element;
        if (cache.enabled) cache.at(0, slot + j) = element;
      }
    }
    const A mean = reduce_across_row(total, Sum{}) / static_cast<A>(cols);
    A squares = 0;
    for (int64_t v = threadIdx.x, slot = 0; v < vectors; v += blockDim.x, slot += kVec) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        A deviation = value(v, j, slot + j) - mean;
        squares += deviation * deviation;
      }
    }
    const A invstd = inverse_sqrt(reduce_across_row(squares, Sum{}) / static_cast<A>(cols) + eps);
    if (threadIdx.x == 0) {
      save_mean[row] = mean;
      save_invstd[row] = invstd;
    }
    Vector* y = reinterpret_cast<Vector*>(output + row * cols);
    for (int64_t v = threadIdx.x, slot = 0; v < vectors; v += blockDim.x, slot += kVec) {
      Vector result;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        int64_t c = v * kVec + j;
        A normalised = (value(v, j, slot + j) - mean) * invstd;
        result.value[j] = from_compute<T>(normalised * column_value(weight, c, A(1)) + column_value(bias, c, A(0)));
      }
      y[v] = result;
    }
  }
}

// ---- backward: grad_input ----

// grad_sum is null without a residual add.
template <int kVec, class T, class W, class A>
__global__ void layer_norm_grad_input_kernel(const T* grad_output, const T* input, const W* weight,
                                             const A* save_mean, const A* save_invstd, const T* grad_sum,
                                             int64_t rows, int64_t cols, bool cached, T* grad_input) {
  using Vector = AlignedVector<T, kVec>;
  const int64_t vectors = cols / kVec;
  const RowCache<A> cache = RowCache<A>::for_this_thread(vectors, kVec, 2, cached);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const T* x = input + row * cols;
    const T* g = grad_output + row * cols;
    const A mean = save_mean[row], invstd = save_invstd[row];
    // Array 0 caches xhat, array 1 gw.
    auto xhat_at = [&](int64_t v, int j, int64_t slot) {
      return cache.enabled ? cache.at(0, slot) : (to_compute<A>(x[v * kVec + j]) - mean) * invstd;
    };
    auto scaled_at = [&](int64_t v, int j, int64_t slot) {
      int64_t c = v * kVec + j;
      return cache.enabled ? cache.at(1, slot) : to_compute<A>(g[c]) * column_value(weight, c, A(1));
    };
    A sum_scaled = 0, sum_scaled_xhat = 0;
    for (int64_t v = threadIdx.x, slot = 0; v < vectors; v += blockDim.x, slot += kVec) {
      Vector x_loaded = reinterpret_cast<const Vector*>(x)[v];
      Vector g_loaded = reinterpret_cast<const Vector*>(g)[v];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        A xhat = (to_compute<A>(x_loaded.value[j]) - mean) * invstd;
        A scaled = to_compute<A>(g_loaded.value[j]) * column_value(weight, v * kVec + j, A(1));
        sum_scaled += scaled;
        sum_scaled_xhat += scaled * xhat;
        if (cache.enabled) {
          cache.at(0, slot + j) = xhat;
          cache.at(1, slot + j) = scaled;
        }
      }
    }
    const A mean_scaled = reduce_across_row(sum_scaled, Sum{}) / static_cast<A>(cols);
    const A mean_scaled_xhat = reduce_across_row(sum_scaled_xhat, Sum{}) / static_cast<A>(cols);
    Vector* dx = reinterpret_cast<Vector*>(grad_input + row * cols);
    for (int64_t v = threadIdx.x, slot = 0; v < vectors; v += blockDim.x, slot += kVec) {
      Vector added;
      if (grad_sum != nullptr) added = reinterpret_cast<const Vector*>(grad_sum + row * cols)[v];
      Vector result;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        A gradient = invstd * (scaled_at(v, j, slot + j) - mean_scaled - xhat_at(v, j, slot + j) * mean_scaled_xhat);
        if (grad_sum != nullptr) gradient += to_compute<A>(added.value[j]);
        result.value[j] = from_compute<T>(gradient);
      }
      dx[v] = result;
    }
  }
}

// ---- backward: grad_weight and grad_bias ----

constexpr int kColumnTile = 32;    // columns per block: a warp's coalesced read
constexpr int kRowPhases = 8;      // rows a block reads at once
constexpr int64_t kTargetColumnBlocks = 1024;

// Partial sums of g * xhat and g over chunk blockIdx.y of the rows, for the columns of
// tile blockIdx.x: partial_weight / partial_bias (chunks, cols).
template <class T, class A>
__global__ void __launch_bounds__(kColumnTile* kRowPhases)
    layer_norm_column_partials_kernel(const T* grad_output, const T* input, const A* save_mean, const A* save_invstd,
                                      int64_t rows, int64_t cols, int64_t rows_per_chunk, A* partial_weight,
                                      A* partial_bias) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  A sum_grad_xhat = 0, sum_grad = 0;
  if (c < cols) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowPhases) {
      A gradient = to_compute<A>(grad_output[r * cols + c]);
      sum_grad_xhat += gradient * (to_compute<A>(input[r * cols + c]) - save_mean[r]) * save_invstd[r];
      sum_grad += gradient;
    }
  }
  __shared__ A tile[2][kRowPhases][kColumnTile + 1];
  tile[0][threadIdx.y][threadIdx.x] = sum_grad_xhat;
  tile[1][threadIdx.y][threadIdx.x] = sum_grad;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  for (int phase = 1; phase < kRowPhases; ++phase) {
    sum_grad_xhat += tile[0][phase][threadIdx.x];
    sum_grad += tile[1][phase][threadIdx.x];
  }
  partial_weight[blockIdx.y * cols + c] = sum_grad_xhat;
  partial_bias[blockIdx.y * cols + c] = sum_grad;
}

// Each column's chunks added, in order, into grad_weight / grad_bias (either may be null).
template <class A, class W>
__global__ void layer_norm_column_finish_kernel(const A* partial_weight, const A* partial_bias, int64_t chunks,
                                                int64_t cols, W* grad_weight, W* grad_bias) {
  for (int64_t c = global_thread_index(); c < cols; c += grid_stride()) {
    A weight_total = 0, bias_total = 0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      weight_total += partial_weight[chunk * cols + c];
      bias_total += partial_bias[chunk * cols + c];
    }
    if (grad_weight != nullptr) grad_weight[c] = from_compute<W>(weight_total);
    if (grad_bias != nullptr) grad_bias[c] = from_compute<W>(bias_total);
  }
}

// ---- dispatch ----

// fn.template operator()<Element, W>() with Element the input's C++ type and W the device
// type of weight and bias: the input's, or float for a 16-bit input with float32 ones.
template <class Fn>
void dispatch_types(DType input_dtype, DType parameter_dtype, const char* op, Fn&& fn) {
  dispatch_floating(input_dtype, op, [&]<class Element>() {
    using T = device_t<Element>;
    if constexpr (std::is_same_v<Element, Half> || std::is_same_v<Element, BFloat16>) {
      if (parameter_dtype == DType::Float32) {
        fn.template operator()<Element, float>();
        return;
      }
    }
    MG_ASSERT(parameter_dtype == input_dtype, "layer_norm: parameters of ", parameter_dtype, " with an input of ",
              input_dtype);
    fn.template operator()<Element, T>();
  });
}

// The dtype of the first defined tensor, else `fallback`.
DType first_dtype(std::initializer_list<const Tensor*> tensors, DType fallback) {
  for (const Tensor* tensor : tensors) {
    if (tensor->defined()) return tensor->dtype();
  }
  return fallback;
}

// fn.template operator()<R>() with R the device type of the residual: the input's (also
// when there is none), or a 16-bit one beside a float32 input.
template <class Element, class Fn>
void dispatch_residual(const Tensor& residual, Fn&& fn) {
  using T = device_t<Element>;
  if (!residual.defined() || residual.dtype() == dtype_of<Element>) {
    fn.template operator()<T>();
    return;
  }
  if constexpr (std::is_same_v<Element, float>) {
    if (residual.dtype() == DType::Float16) return fn.template operator()<__half>();
    if (residual.dtype() == DType::BFloat16) return fn.template operator()<__nv_bfloat16>();
  }
  MG_ASSERT(false, "layer_norm: a residual of ", residual.dtype(), " with an input of ", dtype_of<Element>);
}

template <class W>
const W* parameter_data(const Tensor& tensor) {
  return tensor.defined() ? static_cast<const W*>(tensor.raw_data()) : nullptr;
}

// Whether every pointer allows kVec-element vectors on rows of cols elements.
bool vectors_fit(int64_t cols, int vec, size_t element_bytes, std::initializer_list<const void*> pointers) {
  if (cols % vec != 0) return false;
  for (const void* pointer : pointers) {
    if (!is_aligned(pointer, element_bytes * vec)) return false;
  }
  return true;
}

}  // namespace

void layer_norm(const Tensor& input, const Tensor& residual, const Tensor& weight, const Tensor& bias, double eps,
                const Tensor& sum, const Tensor& output, const Tensor& save_mean, const Tensor& save_invstd) {
  const int64_t rows = input.sizes()[0], cols = input.sizes()[1];
  if (rows == 0 || cols == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  DType parameter_dtype = first_dtype({&weight, &bias}, input.dtype());
  dispatch_types(input.dtype(), parameter_dtype, "layer_norm", [&]<class Element, class W>() {
    using T = device_t<Element>;
    using A = accumulate_t<Element>;
    constexpr int kVec = vector_width_v<T>;
    const T* in = device_data<Element>(input);
    T* out = device_data<Element>(output);
    T* summed = residual.defined() ? device_data<Element>(sum) : nullptr;
    dispatch_residual<Element>(residual, [&]<class R>() {
      const R* added = residual.defined() ? static_cast<const R*>(residual.raw_data()) : nullptr;
      auto launch = [&]<int kVecUsed>() {
        RowLaunch config = row_launch(rows, cols / kVecUsed, kVecUsed, 1, sizeof(A));
        layer_norm_kernel<kVecUsed><<<config.blocks, config.block, config.shared_bytes, stream>>>(
            in, added, parameter_data<W>(weight), parameter_data<W>(bias), rows, cols, static_cast<A>(eps),
            config.shared_bytes > 0, summed, out, static_cast<A*>(save_mean.raw_data()),
            static_cast<A*>(save_invstd.raw_data()));
        MG_CUDA_CHECK_LAUNCH();
      };
      if (vectors_fit(cols, kVec, sizeof(T), {in, out, summed}) && vectors_fit(cols, kVec, sizeof(R), {added})) {
        launch.template operator()<kVec>();
      } else {
        launch.template operator()<1>();
      }
    });
  });
}

void layer_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, const Tensor& grad_sum,
                         const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias) {
  const int64_t rows = input.sizes()[0], cols = input.sizes()[1];
  if (cols == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  if (rows == 0) {  // no rows: the column sums are zero
    if (grad_weight.defined()) fill(grad_weight, 0.0);
    if (grad_bias.defined()) fill(grad_bias, 0.0);
    return;
  }
  DType parameter_dtype = first_dtype({&weight, &grad_weight, &grad_bias}, input.dtype());
  dispatch_types(input.dtype(), parameter_dtype, "layer_norm backward", [&]<class Element, class W>() {
    using T = device_t<Element>;
    using A = accumulate_t<Element>;
    constexpr int kVec = vector_width_v<T>;
    const T* in = device_data<Element>(input);
    const T* grad = device_data<Element>(grad_output);
    const A* mean = static_cast<const A*>(save_mean.raw_data());
    const A* invstd = static_cast<const A*>(save_invstd.raw_data());

    if (grad_input.defined()) {
      T* result = device_data<Element>(grad_input);
      const T* added = grad_sum.defined() ? device_data<Element>(grad_sum) : nullptr;
      auto launch = [&]<int kVecUsed>() {
        RowLaunch config = row_launch(rows, cols / kVecUsed, kVecUsed, 2, sizeof(A));
        layer_norm_grad_input_kernel<kVecUsed><<<config.blocks, config.block, config.shared_bytes, stream>>>(
            grad, in, parameter_data<W>(weight), mean, invstd, added, rows, cols, config.shared_bytes > 0, result);
        MG_CUDA_CHECK_LAUNCH();
      };
      if (vectors_fit(cols, kVec, sizeof(T), {in, grad, result, added})) {
        launch.template operator()<kVec>();
      } else {
        launch.template operator()<1>();
      }
    }

    if (!grad_weight.defined() && !grad_bias.defined()) return;
    const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
    int64_t chunks = std::clamp<int64_t>((kTargetColumnBlocks + tiles - 1) / tiles, 1, (rows + kRowPhases - 1) / kRowPhases);
    chunks = std::min<int64_t>(chunks, 65535);  // gridDim.y's limit
    const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
    chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
    // (2, chunks, cols) partial sums; freed on this stream once the kernels are queued.
    Tensor partials = empty({2 * chunks * cols},
                            {.dtype = dtype_of<A>, .device = device, .category = MemoryCategory::Workspace});
    A* partial_weight = static_cast<A*>(partials.raw_data());
    A* partial_bias = partial_weight + chunks * cols;
    dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
    layer_norm_column_partials_kernel<<<grid, dim3(kColumnTile, kRowPhases), 0, stream>>>(
        grad, in, mean, invstd, rows, cols, rows_per_chunk, partial_weight, partial_bias);
    MG_CUDA_CHECK_LAUNCH();
    LaunchConfig finish = launch_config(cols);
    layer_norm_column_finish_kernel<<<finish.blocks, finish.threads, 0, stream>>>(
        partial_weight, partial_bias, chunks, cols, grad_weight.defined() ? static_cast<W*>(grad_weight.raw_data()) : nullptr,
        grad_bias.defined() ? static_cast<W*>(grad_bias.raw_data()) : nullptr);
    MG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mg::cuda
