// core/cpu/pool.cpp — CPU 2-D max and average pooling, forward and backward, on tensors
// dense in NCHW or channels-last order (each tensor is indexed through its own strides, so
// the outputs simply take the layout they were allocated in), with PyTorch's semantics: padding counts as -inf for max and (optionally) as
// zeros for the average divisor; dilation for max; the output sizes (ceil_mode included)
// are the caller's, read from the output tensor.
//
// Each (n, c) plane is independent, so OpenMP splits the N*C planes. Backward scatters
// from each output into its window: windows overlap when stride < kernel, so it adds; one
// plane is only ever touched by one thread, so no atomics are needed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

namespace {

// Geometry shared by the four kernels: input plane (H, W), output plane (P, Q).
struct PlaneSizes {
  int64_t planes, channels, height, width, out_height, out_width;
};

PlaneSizes plane_sizes(const Tensor& input_like, const Tensor& output_like) {
  const Shape& in = input_like.sizes();
  const Shape& out = output_like.sizes();
  return {in[0] * in[1], in[1], in[2], in[3], out[2], out[3]};
}

// Where the (n, c) plane of a 4-D tensor starts and how its rows and columns step.
struct PlaneView {
  Shape strides;
  int64_t start(const PlaneSizes& sizes, int64_t plane) const {
    return (plane / sizes.channels) * strides[0] + (plane % sizes.channels) * strides[1];
  }
  int64_t at(int64_t h, int64_t w) const { return h * strides[2] + w * strides[3]; }
};

PlaneView plane_view(const Tensor& tensor) { return {tensor.strides()}; }

// One output's averaging window, clipped to the input, and its divisor (PyTorch's rule:
// with count_include_pad the size before clipping to the input, but after clipping to the
// padded input; without it, after clipping to the input).
struct AvgWindow {
  int64_t h_start, h_end, w_start, w_end, divisor;
};

AvgWindow avg_window(const Window2d& window, int64_t height, int64_t width, int64_t oh, int64_t ow) {
  int64_t h_start = oh * window.stride_h - window.pad_h;
  int64_t w_start = ow * window.stride_w - window.pad_w;
  int64_t h_end = std::min(h_start + window.kernel_h, height + window.pad_h);
  int64_t w_end = std::min(w_start + window.kernel_w, width + window.pad_w);
  int64_t padded_size = (h_end - h_start) * (w_end - w_start);
  h_start = std::max<int64_t>(h_start, 0);
  w_start = std::max<int64_t>(w_start, 0);
  h_end = std::min(h_end, height);
  w_end = std::min(w_end, width);
  int64_t divisor = window.count_include_pad ? padded_size : (h_end - h_start) * (w_end - w_start);
  return {h_start, h_end, w_start, w_end, divisor};
}

template <class T>
using pool_compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A backward's (H, W) row-major accumulator written to its plane of grad_input.
template <class T, class C>
void store_plane(const std::vector<C>& accumulated, const PlaneSizes& sizes, T* plane, const PlaneView& view) {
  for (int64_t h = 0; h < sizes.height; ++h)
    for (int64_t w = 0; w < sizes.width; ++w) plane[view.at(h, w)] = static_cast<T>(accumulated[h * sizes.width + w]);
}

// The common max-pool case: 2x2 windows at stride 2 with no padding or dilation, every
// window inside the input, all tensors NCHW-contiguous. Its loops need no bounds checks or
// stride arithmetic, so they run several times faster; they follow the general loops' rules
// exactly (same winner, same index, same +0 where no gradient lands).
bool is_plain_halving(const Tensor& input, const Tensor& output, const Tensor& window_indices, const Window2d& window) {
  return window.kernel_h == 2 && window.kernel_w == 2 && window.stride_h == 2 && window.stride_w == 2 &&
         window.pad_h == 0 && window.pad_w == 0 && window.dilation_h == 1 && window.dilation_w == 1 &&
         input.is_contiguous() && output.is_contiguous() && window_indices.is_contiguous() &&
         2 * output.sizes()[2] <= input.sizes()[2] && 2 * output.sizes()[3] <= input.sizes()[3];
}

template <class T>
void max_pool_halving_plane(const T* in, const PlaneSizes& sizes, T* out, uint8_t* indices) {
  using C = pool_compute_t<T>;
  for (int64_t oh = 0; oh < sizes.out_height; ++oh) {
    const T* top = in + 2 * oh * sizes.width;
    const T* bottom = top + sizes.width;
    for (int64_t ow = 0; ow < sizes.out_width; ++ow) {
      C window[4] = {static_cast<C>(top[2 * ow]), static_cast<C>(top[2 * ow + 1]), static_cast<C>(bottom[2 * ow]),
                     static_cast<C>(bottom[2 * ow + 1])};
      C best = window[0];
      uint8_t position = 0;
      for (uint8_t i = 1; i < 4; ++i) {
        if (window[i] > best || std::isnan(window[i])) best = window[i], position = i;
      }
      out[oh * sizes.out_width + ow] = static_cast<T>(best);
      indices[oh * sizes.out_width + ow] = position;
    }
  }
}

template <class T>
void max_pool_halving_backward_plane(const T* grad, const uint8_t* indices, const PlaneSizes& sizes, T* result) {
  using C = pool_compute_t<T>;
  std::fill(result, result + sizes.height * sizes.width, T(0));  // rows and columns no window covers
  for (int64_t oh = 0; oh < sizes.out_height; ++oh) {
    T* top = result + 2 * oh * sizes.width;
    T* bottom = top + sizes.width;
    for (int64_t ow = 0; ow < sizes.out_width; ++ow) {
      // 0 + g as the general loop's accumulator computes it (so -0 becomes +0 there too).
      C value = C(0) + static_cast<C>(grad[oh * sizes.out_width + ow]);
      uint8_t position = indices[oh * sizes.out_width + ow];
      top[2 * ow] = static_cast<T>(position == 0 ? value : C(0));
      top[2 * ow + 1] = static_cast<T>(position == 1 ? value : C(0));
      bottom[2 * ow] = static_cast<T>(position == 2 ? value : C(0));
      bottom[2 * ow + 1] = static_cast<T>(position == 3 ? value : C(0));
    }
  }
}

}  // namespace

void max_pool2d(const Tensor& input, const Window2d& window, const Tensor& output, const Tensor& window_indices) {
  PlaneSizes sizes = plane_sizes(input, output);
  dispatch_floating(input.dtype(), "max_pool2d", [&]<class T>() {
    using C = pool_compute_t<T>;
    const T* in = input.data_ptr<T>();
    T* out = output.data_ptr<T>();
    uint8_t* indices = window_indices.data_ptr<uint8_t>();
    PlaneView in_view = plane_view(input), out_view = plane_view(output);  // indices share the output's layout
    if (is_plain_halving(input, output, window_indices, window)) {
      int64_t in_plane = sizes.height * sizes.width, out_plane = sizes.out_height * sizes.out_width;
#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain)
      for (int64_t plane = 0; plane < sizes.planes; ++plane) {
        max_pool_halving_plane(in + plane * in_plane, sizes, out + plane * out_plane, indices + plane * out_plane);
      }
      return;
    }
#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain)
    for (int64_t plane = 0; plane < sizes.planes; ++plane) {
      const T* in_plane = in + in_view.start(sizes, plane);
      int64_t out_base = out_view.start(sizes, plane);
      for (int64_t oh = 0; oh < sizes.out_height; ++oh) {
        for (int64_t ow = 0; ow < sizes.out_width; ++ow) {
          int64_t h_start = oh * window.stride_h - window.pad_h;
          int64_t w_start = ow * window.stride_w - window.pad_w;
          C best = -std::numeric_limits<C>::infinity();
          int64_t best_position = -1;
          for (int64_t r = 0; r < window.kernel_h; ++r) {
            int64_t h = h_start + r * window.dilation_h;
            if (h < 0 || h >= sizes.height) continue;
            for (int64_t s = 0; s < window.kernel_w; ++s) {
              int64_t w = w_start + s * window.dilation_w;
              if (w < 0 || w >= sizes.width) continue;
              C value = static_cast<C>(in_plane[in_view.at(h, w)]);
              // PyTorch's rule: a strictly larger value or a NaN takes over (so NaN
              // propagates and, among equal maxima, the first wins). The first in-bounds
              // element is always taken so that an all -inf window still points inside
              // the input (backward must never scatter into padding).
              if (best_position < 0 || value > best || std::isnan(value)) {
                best = value;
                best_position = r * window.kernel_w + s;
              }
            }
          }
          int64_t at = out_base + out_view.at(oh, ow);
          out[at] = static_cast<T>(best);
          indices[at] = static_cast<uint8_t>(std::max<int64_t>(best_position, 0));
        }
      }
    }
  });
}

void max_pool2d_backward(const Tensor& grad_output, const Tensor& window_indices, const Window2d& window,
                         const Tensor& grad_input) {
  PlaneSizes sizes = plane_sizes(grad_input, grad_output);
  dispatch_floating(grad_output.dtype(), "max_pool2d backward", [&]<class T>() {
    using C = pool_compute_t<T>;
    const T* grad = grad_output.data_ptr<T>();
    const uint8_t* indices = window_indices.data_ptr<uint8_t>();
    T* result = grad_input.data_ptr<T>();
    int64_t plane_size = sizes.height * sizes.width;
    PlaneView in_view = plane_view(grad_input), out_view = plane_view(grad_output);  // indices: grad_output's layout
    if (is_plain_halving(grad_input, grad_output, window_indices, window)) {
      int64_t out_plane = sizes.out_height * sizes.out_width;
#pragma omp parallel for schedule(static) if (grad_input.numel() >= kParallelGrain)
      for (int64_t plane = 0; plane < sizes.planes; ++plane) {
        max_pool_halving_backward_plane(grad + plane * out_plane, indices + plane * out_plane, sizes,
                                        result + plane * plane_size);
      }
      return;
    }
#pragma omp parallel for schedule(static) if (grad_input.numel() >= kParallelGrain)
    for (int64_t plane = 0; plane < sizes.planes; ++plane) {
      // Accumulate in the compute type (16-bit sums would round at every step).
      std::vector<C> accumulated(static_cast<size_t>(plane_size), C(0));
      int64_t out_base = out_view.start(sizes, plane);
      for (int64_t oh = 0; oh < sizes.out_height; ++oh) {
        for (int64_t ow = 0; ow < sizes.out_width; ++ow) {
          int64_t at = out_base + out_view.at(oh, ow);
          int64_t position = indices[at];
          int64_t h = oh * window.stride_h - window.pad_h + (position / window.kernel_w) * window.dilation_h;
          int64_t w = ow * window.stride_w - window.pad_w + (position % window.kernel_w) * window.dilation_w;
          accumulated[h * sizes.width + w] += static_cast<C>(grad[at]);
        }
      }
      store_plane(accumulated, sizes, result + in_view.start(sizes, plane), in_view);
    }
  });
}

void avg_pool2d(const Tensor& input, const Window2d& window, const Tensor& output) {
  PlaneSizes sizes = plane_sizes(input, output);
  dispatch_floating(input.dtype(), "avg_pool2d", [&]<class T>() {
    using C = pool_compute_t<T>;
    const T* in = input.data_ptr<T>();
    T* out = output.data_ptr<T>();
    PlaneView in_view = plane_view(input), out_view = plane_view(output);
#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain)
    for (int64_t plane = 0; plane < sizes.planes; ++plane) {
      const T* in_plane = in + in_view.start(sizes, plane);
      int64_t out_base = out_view.start(sizes, plane);
      for (int64_t oh = 0; oh < sizes.out_height; ++oh) {
        for (int64_t ow = 0; ow < sizes.out_width; ++ow) {
          AvgWindow box = avg_window(window, sizes.height, sizes.width, oh, ow);
          C total = 0;
          for (int64_t h = box.h_start; h < box.h_end; ++h)
            for (int64_t w = box.w_start; w < box.w_end; ++w) total += static_cast<C>(in_plane[in_view.at(h, w)]);
          // An empty window (possible only in ceil_mode corner cases) averages to 0.
          out[out_base + out_view.at(oh, ow)] = static_cast<T>(box.divisor > 0 ? total / C(box.divisor) : C(0));
        }
      }
    }
  });
}

void avg_pool2d_backward(const Tensor& grad_output, const Window2d& window, const Tensor& grad_input) {
  PlaneSizes sizes = plane_sizes(grad_input, grad_output);
  dispatch_floating(grad_output.dtype(), "avg_pool2d backward", [&]<class T>() {
    using C = pool_compute_t<T>;
    const T* grad = grad_output.data_ptr<T>();
    T* result = grad_input.data_ptr<T>();
    int64_t plane_size = sizes.height * sizes.width;
    PlaneView in_view = plane_view(grad_input), out_view = plane_view(grad_output);
#pragma omp parallel for schedule(static) if (grad_input.numel() >= kParallelGrain)
    for (int64_t plane = 0; plane < sizes.planes; ++plane) {
      std::vector<C> accumulated(static_cast<size_t>(plane_size), C(0));
      int64_t out_base = out_view.start(sizes, plane);
      for (int64_t oh = 0; oh < sizes.out_height; ++oh) {
        for (int64_t ow = 0; ow < sizes.out_width; ++ow) {
          AvgWindow box = avg_window(window, sizes.height, sizes.width, oh, ow);
          if (box.divisor <= 0) continue;
          C share = static_cast<C>(grad[out_base + out_view.at(oh, ow)]) / C(box.divisor);
          for (int64_t h = box.h_start; h < box.h_end; ++h)
            for (int64_t w = box.w_start; w < box.w_end; ++w) accumulated[h * sizes.width + w] += share;
        }
      }
      store_plane(accumulated, sizes, result + in_view.start(sizes, plane), in_view);
    }
  });
}

}  // namespace mg::cpu
