// cuda/kernels/batch_norm.cu — CUDA batch normalisation, forward (training and evaluation)
// and the training-mode backward, over contiguous (N, C) or (N, C, H, W) inputs.
//
// As on the CPU (core/cpu/batch_norm.cpp), the input is seen as (N, C, inner) with
// element (n, c, i) at (n * C + c) * inner + i.
//
//   forward, training: one block per channel sums over its N * inner values (each thread a
//     strided partial, then reduce_across_row: a two-level reduction), in float for
//     float32 / 16-bit inputs and double for float64; mean first, then squared deviations
//     (no cancellation when |mean| >> std). Thread 0 writes save_mean / save_invstd and
//     updates the running statistics on the device, so nothing waits for the host.
//   forward, both modes: an elementwise kernel normalises (in eval straight from the
//     running statistics).
//   backward: one block per channel computes sum(g) and sum(g * xhat) (which are also
//     grad_bias and grad_weight), then an elementwise kernel writes grad_input.
//
// Per-channel tensors may have another dtype than the input (float32 statistics for a
// 16-bit input, a float32 weight), so they travel as ChannelValues (pointer + dtype) and are
// read per element through a switch that is uniform across a warp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "core/factory.h"
#include "cuda/check.h"
#include "cuda/kernels/cuda_kernels.h"
#include "cuda/kernels/row_reduce.cuh"
#include "cuda/kernels/strided_indexer.cuh"
#include "cuda/runtime.h"

namespace mg::cuda {

namespace {

constexpr int kThreadsPerChannel = 512;  // a block per channel (a multiple of 32, <= 1024)

enum class ChannelKind : int { Absent, Float32, Float64, Float16, BFloat16 };

// A per-channel tensor (C values) of any floating dtype, or none.
struct ChannelValues {
  void* data = nullptr;
  ChannelKind kind = ChannelKind::Absent;
};

ChannelValues channel_values(const Tensor& values) {
  if (!values.defined()) return {};
  switch (values.dtype()) {
    case DType::Float32: return {values.raw_data(), ChannelKind::Float32};
    case DType::Float64: return {values.raw_data(), ChannelKind::Float64};
    case DType::Float16: return {values.raw_data(), ChannelKind::Float16};
    case DType::BFloat16: return {values.raw_data(), ChannelKind::BFloat16};
    default: MG_CHECK(false, "batch_norm: per-channel tensors must be floating, got ", values.dtype());
  }
  return {};
}

// Value c, or `fallback` when absent (no weight means 1, no bias 0).
__device__ __forceinline__ double load_channel(ChannelValues values, int64_t c, double fallback) {
  switch (values.kind) {
    case ChannelKind::Float32: return static_cast<const float*>(values.data)[c];
    case ChannelKind::Float64: return static_cast<const double*>(values.data)[c];
    case ChannelKind::Float16: return __half2float(static_cast<const __half*>(values.data)[c]);
    case ChannelKind::BFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(values.data)[c]);
    default: return fallback;
  }
}

__device__ __forceinline__ void store_channel(ChannelValues values, int64_t c, double value) {
  switch (values.kind) {
    case ChannelKind::Float32: static_cast<float*>(values.data)[c] = static_cast<float>(value); break;
    case ChannelKind::Float64: static_cast<double*>(values.data)[c] = value; break;
    case ChannelKind::Float16: static_cast<__half*>(values.data)[c] = __float2half(static_cast<float>(value)); break;
    case ChannelKind::BFloat16:
      static_cast<__nv_bfloat16*>(values.data)[c] = __float2bfloat16(static_cast<float>(value));
      break;
    default: break;
  }
}

template <class A>
__device__ __forceinline__ A inverse_sqrt(A x) {
  if constexpr (std::is_same_v<A, double>) return ::rsqrt(x);
  else return ::rsqrtf(x);
}

struct SumOf {
  template <class A>
  __device__ __forceinline__ A operator()(A total, A value) const { return total + value; }
};

struct Layout {
  int64_t batch, channels, inner;
  __device__ __forceinline__ int64_t offset(int64_t c, int64_t j) const {  // j-th value of channel c
    int64_t n = j / inner;
    return (n * channels + c) * inner + (j - n * inner);
  }
};

Layout layout_of(const Tensor& input) {
  Layout layout{input.sizes()[0], input.sizes()[1], 1};
  for (int d = 2; d < input.dim(); ++d) layout.inner *= input.sizes()[d];
  return layout;
}

// ---- forward ----

template <class T, class A>
__global__ void batch_norm_stats_kernel(const T* input, Layout layout, double momentum, double eps,
                                        ChannelValues save_mean, ChannelValues save_invstd,
                                        ChannelValues running_mean, ChannelValues running_var) {
  int64_t c = blockIdx.x;
  int64_t count = layout.batch * layout.inner;
  A total = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) total += to_compute<A>(input[layout.offset(c, j)]);
  total = reduce_across_row(total, SumOf{});
  A mean = total / static_cast<A>(count);
  A squares = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    A deviation = to_compute<A>(input[layout.offset(c, j)]) - mean;
    squares += deviation * deviation;
  }
  squares = reduce_across_row(squares, SumOf{});
  if (threadIdx.x != 0) return;
  A biased_var = squares / static_cast<A>(count);
  store_channel(save_mean, c, mean);
  store_channel(save_invstd, c, inverse_sqrt(biased_var + static_cast<A>(eps)));
  // The running variance estimates the population's, hence n / (n - 1) as in PyTorch.
  double unbiased_var = count > 1 ? static_cast<double>(squares) / (count - 1) : static_cast<double>(biased_var);
  if (running_mean.kind != ChannelKind::Absent) {
    store_channel(running_mean, c, (1 - momentum) * load_channel(running_mean, c, 0.0) + momentum * mean);
  }
  if (running_var.kind != ChannelKind::Absent) {
    store_channel(running_var, c, (1 - momentum) * load_channel(running_var, c, 1.0) + momentum * unbiased_var);
  }
}

// y = (x - mean) * invstd * w + b; in evaluation `spread` holds the variance, else invstd.
template <class T, class A>
__global__ void batch_norm_apply_kernel(const T* input, int64_t total, Layout layout, ChannelValues mean,
                                        ChannelValues spread, bool spread_is_var, double eps, ChannelValues weight,
                                        ChannelValues bias, T* output) {
  for (int64_t index = global_thread_index(); index < total; index += grid_stride()) {
    int64_t c = (index / layout.inner) % layout.channels;
    A spread_value = static_cast<A>(load_channel(spread, c, 1.0));
    A invstd = spread_is_var ? inverse_sqrt(spread_value + static_cast<A>(eps)) : spread_value;
    A scale = invstd * static_cast<A>(load_channel(weight, c, 1.0));
    A centred = to_compute<A>(input[index]) - static_cast<A>(load_channel(mean, c, 0.0));
    output[index] = from_compute<T>(centred * scale + static_cast<A>(load_channel(bias, c, 0.0)));
  }
}

// ---- backward ----

// sums[2c] = sum(g), sums[2c + 1] = sum(g * xhat) over channel c; also grad_bias / grad_weight.
template <class T, class A>
__global__ void batch_norm_backward_reduce_kernel(const T* grad_output, const T* input, Layout layout,
                                                  ChannelValues mean, ChannelValues invstd, A* sums,
                                                  ChannelValues grad_weight, ChannelValues grad_bias) {
  int64_t c = blockIdx.x;
  int64_t count = layout.batch * layout.inner;
  A channel_mean = static_cast<A>(load_channel(mean, c, 0.0));
  A channel_invstd = static_cast<A>(load_channel(invstd, c, 1.0));
  A total = 0, dot = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    int64_t at = layout.offset(c, j);
    A g = to_compute<A>(grad_output[at]);
    total += g;
    dot += g * (to_compute<A>(input[at]) - channel_mean) * channel_invstd;
  }
  total = reduce_across_row(total, SumOf{});
  dot = reduce_across_row(dot, SumOf{});
  if (threadIdx.x != 0) return;
  sums[2 * c] = total;
  sums[2 * c + 1] = dot;
  store_channel(grad_bias, c, total);
  store_channel(grad_weight, c, dot);
}

// dx = w * invstd / n * (n * g - sum(g) - xhat * sum(g * xhat)).
template <class T, class A>
__global__ void batch_norm_backward_input_kernel(const T* grad_output, const T* input, int64_t total_values,
                                                 Layout layout, ChannelValues mean, ChannelValues invstd,
                                                 ChannelValues weight, const A* sums, T* grad_input) {
  A count = static_cast<A>(layout.batch * layout.inner);
  for (int64_t index = global_thread_index(); index < total_values; index += grid_stride()) {
    int64_t c = (index / layout.inner) % layout.channels;
    A channel_invstd = static_cast<A>(load_channel(invstd, c, 1.0));
    A xhat = (to_compute<A>(input[index]) - static_cast<A>(load_channel(mean, c, 0.0))) * channel_invstd;
    A factor = static_cast<A>(load_channel(weight, c, 1.0)) * channel_invstd / count;
    A g = to_compute<A>(grad_output[index]);
    grad_input[index] = from_compute<T>(factor * (count * g - sums[2 * c] - xhat * sums[2 * c + 1]));
  }
}

template <class Element>
using accumulate_t = std::conditional_t<std::is_same_v<Element, double>, double, float>;

}  // namespace

void batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, bool training, double momentum, double eps, const Tensor& output,
                const Tensor& save_mean, const Tensor& save_invstd) {
  Layout layout = layout_of(input);
  int64_t total = input.numel();
  if (total == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_floating(input.dtype(), "batch_norm", [&]<class Element>() {
    using T = device_t<Element>;
    using A = accumulate_t<Element>;
    const T* in = static_cast<const T*>(input.raw_data());
    ChannelValues mean, spread;
    if (training) {
      // The statistics must live somewhere between the two kernels even if nobody keeps them.
      Tensor mean_store = save_mean.defined() ? save_mean : empty({layout.channels}, {.dtype = dtype_of<A>, .device = device});
      Tensor invstd_store =
          save_invstd.defined() ? save_invstd : empty({layout.channels}, {.dtype = dtype_of<A>, .device = device});
      mean = channel_values(mean_store);
      spread = channel_values(invstd_store);
      batch_norm_stats_kernel<T, A><<<static_cast<unsigned>(layout.channels), kThreadsPerChannel, 0, stream>>>(
          in, layout, momentum, eps, mean, spread, channel_values(running_mean), channel_values(running_var));
      MG_CUDA_CHECK_LAUNCH();
      LaunchConfig config = launch_config(total);
      batch_norm_apply_kernel<T, A><<<config.blocks, config.threads, 0, stream>>>(
          in, total, layout, mean, spread, false, eps, channel_values(weight), channel_values(bias),
          static_cast<T*>(output.raw_data()));
      MG_CUDA_CHECK_LAUNCH();
      // Scratch statistics go back to the caching allocator on this stream: reuse is ordered.
    } else {
      LaunchConfig config = launch_config(total);
      batch_norm_apply_kernel<T, A><<<config.blocks, config.threads, 0, stream>>>(
          in, total, layout, channel_values(running_mean), channel_values(running_var), true, eps,
          channel_values(weight), channel_values(bias), static_cast<T*>(output.raw_data()));
      MG_CUDA_CHECK_LAUNCH();
    }
  });
}

void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, const Tensor& grad_input,
                         const Tensor& grad_weight, const Tensor& grad_bias) {
  Layout layout = layout_of(input);
  int64_t total = input.numel();
  if (layout.channels == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_floating(input.dtype(), "batch_norm backward", [&]<class Element>() {
    using T = device_t<Element>;
    using A = accumulate_t<Element>;
    const T* grad = static_cast<const T*>(grad_output.raw_data());
    const T* in = static_cast<const T*>(input.raw_data());
    Tensor sums = empty({2 * layout.channels}, {.dtype = dtype_of<A>, .device = device});  // (sum g, sum g*xhat) per channel
    batch_norm_backward_reduce_kernel<T, A><<<static_cast<unsigned>(layout.channels), kThreadsPerChannel, 0, stream>>>(
        grad, in, layout, channel_values(save_mean), channel_values(save_invstd), static_cast<A*>(sums.raw_data()),
        channel_values(grad_weight), channel_values(grad_bias));
    MG_CUDA_CHECK_LAUNCH();
    if (!grad_input.defined() || total == 0) return;
    LaunchConfig config = launch_config(total);
    batch_norm_backward_input_kernel<T, A><<<config.blocks, config.threads, 0, stream>>>(
        grad, in, total, layout, channel_values(save_mean), channel_values(save_invstd), channel_values(weight),
        static_cast<const A*>(sums.raw_data()), static_cast<T*>(grad_input.raw_data()));
    MG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mg::cuda
