// cuda/kernels/pool.cu — CUDA 2-D max and average pooling (NCHW, contiguous), forward and
// backward, with the same semantics and the same arithmetic as core/cpu/pool.cpp.
//
//   forward: one thread per output element walks its window.
//   backward: one thread per INPUT element gathers from the outputs whose windows contain
//     it. Overlapping windows (stride < kernel) would need atomics in a scatter; a gather
//     needs none and is deterministic. The outputs are visited in the CPU's order (rows
//     then columns ascending), so float32 / float64 results match the CPU bit for bit.
//
// 16-bit types are read as __half / __nv_bfloat16 and computed in float; float64 in double.
#include <type_traits>

#include "cuda/check.h"
#include "cuda/kernels/cuda_kernels.h"
#include "cuda/kernels/strided_indexer.cuh"
#include "cuda/runtime.h"

namespace mg::cuda {

namespace {

template <class Element>
using pool_compute_t = std::conditional_t<std::is_same_v<Element, double>, double, float>;

// Plane geometry: input (H, W), output (P, Q), planes = N * C.
struct PlaneSizes {
  int64_t planes, height, width, out_height, out_width;
};

PlaneSizes plane_sizes(const Tensor& input_like, const Tensor& output_like) {
  const Shape& in = input_like.sizes();
  const Shape& out = output_like.sizes();
  return {in[0] * in[1], in[2], in[3], out[2], out[3]};
}

// One output's averaging window clipped to the input and its divisor: PyTorch's rule, as
// avg_window in core/cpu/pool.cpp.
struct AvgWindow {
  int64_t h_start, h_end, w_start, w_end, divisor;
};

__device__ __forceinline__ AvgWindow avg_window(const Window2d& window, int64_t height, int64_t width, int64_t oh,
                                                int64_t ow) {
  int64_t h_start = oh * window.stride_h - window.pad_h;
  int64_t w_start = ow * window.stride_w - window.pad_w;
  int64_t h_end = min(h_start + window.kernel_h, height + window.pad_h);
  int64_t w_end = min(w_start + window.kernel_w, width + window.pad_w);
  int64_t padded_size = (h_end - h_start) * (w_end - w_start);
  h_start = max(h_start, int64_t(0));
  w_start = max(w_start, int64_t(0));
  h_end = min(h_end, height);
  w_end = min(w_end, width);
  int64_t divisor = window.count_include_pad ? padded_size : (h_end - h_start) * (w_end - w_start);
  return {h_start, h_end, w_start, w_end, divisor};
}

template <class C>
__device__ __forceinline__ bool is_nan(C value) { return value != value; }

template <class T, class C>
__global__ void max_pool2d_kernel(const T* input, PlaneSizes sizes, Window2d window, T* output,
                                  uint8_t* window_indices) {
  int64_t total = sizes.planes * sizes.out_height * sizes.out_width;
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    int64_t ow = i % sizes.out_width;
    int64_t oh = (i / sizes.out_width) % sizes.out_height;
    int64_t plane = i / (sizes.out_width * sizes.out_height);
    const T* in_plane = input + plane * sizes.height * sizes.width;
    int64_t h_start = oh * window.stride_h - window.pad_h;
    int64_t w_start = ow * window.stride_w - window.pad_w;
    C best = -static_cast<C>(INFINITY);
    int64_t best_position = -1;
    for (int64_t r = 0; r < window.kernel_h; ++r) {
      int64_t h = h_start + r * window.dilation_h;
      if (h < 0 || h >= sizes.height) continue;
      for (int64_t s = 0; s < window.kernel_w; ++s) {
        int64_t w = w_start + s * window.dilation_w;
        if (w < 0 || w >= sizes.width) continue;
        C value = to_compute<C>(in_plane[h * sizes.width + w]);
        // As the CPU: larger or NaN takes over; the first in-bounds element is always taken.
        if (best_position < 0 || value > best || is_nan(value)) {
          best = value;
          best_position = r * window.kernel_w + s;
        }
      }
    }
    output[i] = from_compute<T>(best);
    window_indices[i] = static_cast<uint8_t>(best_position < 0 ? 0 : best_position);
  }
}

template <class T, class C>
__global__ void max_pool2d_backward_kernel(const T* grad_output, const uint8_t* window_indices, PlaneSizes sizes,
                                           Window2d window, T* grad_input) {
  int64_t total = sizes.planes * sizes.height * sizes.width;
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    int64_t w = i % sizes.width;
    int64_t h = (i / sizes.width) % sizes.height;
    int64_t plane = i / (sizes.width * sizes.height);
    int64_t out_base = plane * sizes.out_height * sizes.out_width;
    C accumulated = 0;
    // Window row r of output row oh covers h when oh * stride - pad + r * dilation == h.
    // r descending visits oh ascending (the CPU's scatter order).
    for (int64_t r = window.kernel_h - 1; r >= 0; --r) {
      int64_t row_offset = h + window.pad_h - r * window.dilation_h;
      if (row_offset < 0 || row_offset % window.stride_h != 0) continue;
      int64_t oh = row_offset / window.stride_h;
      if (oh >= sizes.out_height) continue;
      for (int64_t s = window.kernel_w - 1; s >= 0; --s) {
        int64_t column_offset = w + window.pad_w - s * window.dilation_w;
        if (column_offset < 0 || column_offset % window.stride_w != 0) continue;
        int64_t ow = column_offset / window.stride_w;
        if (ow >= sizes.out_width) continue;
        int64_t at = out_base + oh * sizes.out_width + ow;
        if (window_indices[at] == r * window.kernel_w + s) accumulated += to_compute<C>(grad_output[at]);
      }
    }
    grad_input[i] = from_compute<T>(accumulated);
  }
}

template <class T, class C>
__global__ void avg_pool2d_kernel(const T* input, PlaneSizes sizes, Window2d window, T* output) {
  int64_t total = sizes.planes * sizes.out_height * sizes.out_width;
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    int64_t ow = i % sizes.out_width;
    int64_t oh = (i / sizes.out_width) % sizes.out_height;
    int64_t plane = i / (sizes.out_width * sizes.out_height);
    const T* in_plane = input + plane * sizes.height * sizes.width;
    AvgWindow box = avg_window(window, sizes.height, sizes.width, oh, ow);
    C sum = 0;
    for (int64_t h = box.h_start; h < box.h_end; ++h)
      for (int64_t w = box.w_start; w < box.w_end; ++w) sum += to_compute<C>(in_plane[h * sizes.width + w]);
    output[i] = from_compute<T>(box.divisor > 0 ? sum / C(box.divisor) : C(0));
  }
}

template <class T, class C>
__global__ void avg_pool2d_backward_kernel(const T* grad_output, PlaneSizes sizes, Window2d window, T* grad_input) {
  int64_t total = sizes.planes * sizes.height * sizes.width;
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    int64_t w = i % sizes.width;
    int64_t h = (i / sizes.width) % sizes.height;
    int64_t plane = i / (sizes.width * sizes.height);
    int64_t out_base = plane * sizes.out_height * sizes.out_width;
    // Candidate outputs: those whose unclipped window [o * stride - pad, + kernel) holds
    // the element; the exact clipped window is checked below.
    int64_t padded_h = h + window.pad_h, padded_w = w + window.pad_w;
    int64_t oh_first = padded_h < window.kernel_h ? 0 : (padded_h - window.kernel_h) / window.stride_h + 1;
    int64_t ow_first = padded_w < window.kernel_w ? 0 : (padded_w - window.kernel_w) / window.stride_w + 1;
    int64_t oh_last = min(padded_h / window.stride_h, sizes.out_height - 1);
    int64_t ow_last = min(padded_w / window.stride_w, sizes.out_width - 1);
    C accumulated = 0;
    for (int64_t oh = oh_first; oh <= oh_last; ++oh) {
      for (int64_t ow = ow_first; ow <= ow_last; ++ow) {
        AvgWindow box = avg_window(window, sizes.height, sizes.width, oh, ow);
        if (box.divisor <= 0 || h < box.h_start || h >= box.h_end || w < box.w_start || w >= box.w_end) continue;
        accumulated += to_compute<C>(grad_output[out_base + oh * sizes.out_width + ow]) / C(box.divisor);
      }
    }
    grad_input[i] = from_compute<T>(accumulated);
  }
}

}  // namespace

void max_pool2d(const Tensor& input, const Window2d& window, const Tensor& output, const Tensor& window_indices) {
  if (output.numel() == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  PlaneSizes sizes = plane_sizes(input, output);
  LaunchConfig launch = launch_config(output.numel());
  dispatch_floating(input.dtype(), "max_pool2d", [&]<class Element>() {
    using T = device_t<Element>;
    max_pool2d_kernel<T, pool_compute_t<Element>><<<launch.blocks, launch.threads, 0, stream>>>(
        static_cast<const T*>(input.raw_data()), sizes, window, static_cast<T*>(output.raw_data()),
        static_cast<uint8_t*>(window_indices.raw_data()));
    MG_CUDA_CHECK_LAUNCH();
  });
}

void max_pool2d_backward(const Tensor& grad_output, const Tensor& window_indices, const Window2d& window,
                         const Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  Device device = grad_input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  PlaneSizes sizes = plane_sizes(grad_input, grad_output);
  LaunchConfig launch = launch_config(grad_input.numel());
  dispatch_floating(grad_output.dtype(), "max_pool2d backward", [&]<class Element>() {
    using T = device_t<Element>;
    max_pool2d_backward_kernel<T, pool_compute_t<Element>><<<launch.blocks, launch.threads, 0, stream>>>(
        static_cast<const T*>(grad_output.raw_data()), static_cast<const uint8_t*>(window_indices.raw_data()), sizes,
        window, static_cast<T*>(grad_input.raw_data()));
    MG_CUDA_CHECK_LAUNCH();
  });
}

void avg_pool2d(const Tensor& input, const Window2d& window, const Tensor& output) {
  if (output.numel() == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  PlaneSizes sizes = plane_sizes(input, output);
  LaunchConfig launch = launch_config(output.numel());
  dispatch_floating(input.dtype(), "avg_pool2d", [&]<class Element>() {
    using T = device_t<Element>;
    avg_pool2d_kernel<T, pool_compute_t<Element>><<<launch.blocks, launch.threads, 0, stream>>>(
        static_cast<const T*>(input.raw_data()), sizes, window, static_cast<T*>(output.raw_data()));
    MG_CUDA_CHECK_LAUNCH();
  });
}

void avg_pool2d_backward(const Tensor& grad_output, const Window2d& window, const Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  Device device = grad_input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  PlaneSizes sizes = plane_sizes(grad_input, grad_output);
  LaunchConfig launch = launch_config(grad_input.numel());
  dispatch_floating(grad_output.dtype(), "avg_pool2d backward", [&]<class Element>() {
    using T = device_t<Element>;
    avg_pool2d_backward_kernel<T, pool_compute_t<Element>><<<launch.blocks, launch.threads, 0, stream>>>(
        static_cast<const T*>(grad_output.raw_data()), sizes, window, static_cast<T*>(grad_input.raw_data()));
    MG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mg::cuda
