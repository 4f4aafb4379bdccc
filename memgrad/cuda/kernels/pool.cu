// cuda/kernels/pool.cu — CUDA 2-D max and average pooling, forward and backward, on
// tensors dense in NCHW or channels-last order, with the same semantics and the same
// arithmetic as core/cpu/pool.cpp.
//
//   forward: one thread per output element walks its window.
//   backward: one thread per INPUT element (max pooling: per kTileColumns adjacent input
//     elements of a row) gathers from the outputs whose windows contain it. Overlapping
//     windows (stride < kernel) would need atomics in a scatter; a gather needs none and is
//     deterministic. The outputs are visited in the CPU's order (rows then columns
//     ascending), so float32 / float64 results match the CPU bit for bit.
//
// Threads take elements in the memory order of the tensor they write (ElementOrder), so
// writes are coalesced in both layouts; in channels-last order adjacent threads are
// adjacent channels of one pixel, so the window reads are coalesced too. Every tensor is
// addressed through its own strides.
//
// Max pooling, and average pooling's backward, on channels-last tensors: each thread takes
// V adjacent channels of one pixel (V = 16 bytes / element size: 8 for 16-bit types, 4 for
// float32, 2 for float64; halved until C, the strides and the data's alignment allow it:
// channel_vector_width), with one vector load per window element and V running maxima or
// sums. NOTE: with one element a thread the max pooling kernels were bound by integer
// arithmetic (a full (n, c, h, w) decomposition and a window walk per 2-byte element), not
// by memory: ResNet-50's fp16 stem pool took 0.57 ms forward and 1.41 ms backward on an
// H200 against PyTorch's 0.41 / 0.90 ms. V lanes share one decomposition and one walk
// (the backward's threads also share them across kTileColumns pixels, and index in 32
// bits). Each lane follows the scalar rules exactly (same takeover test, same summation order), so
// results do not depend on V; V = 1 is the plain path (NCHW, C not a multiple of 2).
//
// Max pooling's forward fixes 2x2 and 3x3 windows at compile time, so that a thread issues
// every load of its window before the first comparison; other windows are walked at run
// time, each load after the last one's comparison. (The same for the backward's candidate
// outputs was slower: ResNet-50's stem, 112 -> 168 us on an H200, 2026-12-03.) Every kernel
// here may be launched early (cuda/kernels/dependent_launch.cuh).
//
// 16-bit types are read as __half / __nv_bfloat16 and computed in float; float64 in double.
#include <algorithm>
#include <type_traits>

#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/dependent_launch.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

template <class Element>
using pool_compute_t = std::conditional_t<std::is_same_v<Element, double>, double, float>;

// c counts groups of `channels per item` channels and w groups of `columns per item`
// columns (ElementOrder); plain channels and columns when 1.
template <class Index = int64_t>
struct Coordinates {
  Index n, c, h, w;
};

// (N, C, H, W) element strides of a 4-D tensor. Index = int32_t when every offset in the
// tensor fits (numel < 2^31): 32-bit multiplies are cheaper on the GPU.
template <class Index = int64_t>
struct Strides4 {
  Index n, c, h, w;
  __device__ __forceinline__ Index at(Index batch, Index channel, Index row, Index column) const {
    return batch * n + channel * c + row * h + column * w;
  }
};

template <class Index = int64_t>
Strides4<Index> strides_of(const Tensor& tensor) {
  const Shape& strides = tensor.strides();
  auto of = [](int64_t stride) { return static_cast<Index>(stride); };
  return {of(strides[0]), of(strides[1]), of(strides[2]), of(strides[3])};
}

// The coordinates of the i-th item, in memory order, of a dense (N, C, rows, columns)
// tensor: NCHW (columns fastest) or channels-last (channels fastest). An item is one
// element, or a group of adjacent channels and/or columns for kernels whose threads take
// several (`channels` and `columns` then count the groups).
struct ElementOrder {
  bool channels_last;
  bool narrow;  // numel < 2^31: divide in 32 bits
  int64_t channels, rows, columns;
  IntDivider channel_divider, row_divider, column_divider;

  // i / size, leaving i % size in `index`. A 32-bit Index implies `narrow`.
  template <class Index>
  __device__ __forceinline__ Index split(Index& index, int64_t size, const IntDivider& divider) const {
    Index quotient;
    if constexpr (sizeof(Index) == 4) {
      quotient = static_cast<Index>(divider.divide(static_cast<uint32_t>(index)));
    } else {
      quotient = narrow ? divider.divide(static_cast<uint32_t>(index)) : index / size;
    }
    Index remainder = index - quotient * static_cast<Index>(size);
    index = quotient;
    return remainder;
  }

  template <class Index>
  __device__ __forceinline__ Coordinates<Index> operator()(Index i) const {
    Coordinates<Index> at;
    if (channels_last) {
      at.c = split(i, channels, channel_divider);
      at.w = split(i, columns, column_divider);
      at.h = split(i, rows, row_divider);
    } else {
      at.w = split(i, columns, column_divider);
      at.h = split(i, rows, row_divider);
      at.c = split(i, channels, channel_divider);
    }
    at.n = i;
    return at;
  }
};

// The order of `tensor`'s items of `channels_per_item` adjacent channels (a divisor of C)
// and `columns_per_item` adjacent columns (the last item of a row may have fewer):
// channels-last when that is how it is dense (the autograd ops hand the kernels NCHW or
// channels-last tensors only).
ElementOrder element_order(const Tensor& tensor, int channels_per_item = 1, int columns_per_item = 1) {
  const Shape& sizes = tensor.sizes();
  ElementOrder order{};
  order.channels_last = !tensor.is_contiguous();
  order.narrow = tensor.numel() <= INT32_MAX;
  order.channels = sizes[1] / channels_per_item;
  order.rows = sizes[2];
  order.columns = (sizes[3] + columns_per_item - 1) / columns_per_item;
  if (order.narrow) {
    auto divider = [](int64_t size) { return IntDivider(static_cast<uint32_t>(std::max<int64_t>(size, 1))); };
    order.channel_divider = divider(order.channels);
    order.row_divider = divider(order.rows);
    order.column_divider = divider(order.columns);
  }
  return order;
}

// Plane sizes: input (H, W), output (P, Q).
struct PlaneSizes {
  int64_t height, width, out_height, out_width;
};

PlaneSizes plane_sizes(const Tensor& input_like, const Tensor& output_like) {
  const Shape& in = input_like.sizes();
  const Shape& out = output_like.sizes();
  return {in[2], in[3], out[2], out[3]};
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

// Max pooling's geometry in 32-bit integers: every coordinate fits (a dim has < 2^31
// elements), and 32-bit division and multiplication are several times cheaper on the GPU
// than 64-bit; element offsets need 64 bits only in tensors of 2^31 elements or more.
struct MaxWindow {
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int height, width, out_height, out_width;
  IntDivider stride_h_divider, stride_w_divider;  // for the backward's covering outputs
};

MaxWindow max_window(const Window2d& window, const PlaneSizes& sizes) {
  auto narrow = [](int64_t value) { return static_cast<int>(value); };
  return {narrow(window.kernel_h),   narrow(window.kernel_w), narrow(window.stride_h),   narrow(window.stride_w),
          narrow(window.pad_h),      narrow(window.pad_w),    narrow(window.dilation_h), narrow(window.dilation_w),
          narrow(sizes.height),      narrow(sizes.width),     narrow(sizes.out_height),  narrow(sizes.out_width),
          IntDivider(static_cast<uint32_t>(window.stride_h)), IntDivider(static_cast<uint32_t>(window.stride_w))};
}

// Along one dim, the outputs o whose window (o * stride - pad + k * dilation, k < kernel)
// can hold input position x are first_covering(x) .. last_covering(x), none when first >
// last. The dividends are non-negative ints, which IntDivider divides exactly in three
// instructions (a division by a variable takes about twenty).
__device__ __forceinline__ int first_covering(int x, int kernel, const IntDivider& stride, int pad, int dilation) {
  int lowest_start = x + pad - (kernel - 1) * dilation;  // o * stride >= this
  return lowest_start <= 0 ? 0 : static_cast<int>(stride.divide(lowest_start + stride.divisor - 1));
}
__device__ __forceinline__ int last_covering(int x, const IntDivider& stride, int pad, int outputs) {
  return min(static_cast<int>(stride.divide(x + pad)), outputs - 1);
}

// V adjacent elements (channels of one pixel) read or written with one instruction; `at`
// is aligned to V elements (channel_vector_width checks it).
template <int V, class T>
__device__ __forceinline__ AlignedVector<T, V> load_lanes(const T* at) {
  return *reinterpret_cast<const AlignedVector<T, V>*>(at);
}
template <int V, class T>
__device__ __forceinline__ void store_lanes(T* at, const AlignedVector<T, V>& lanes) {
  *reinterpret_cast<AlignedVector<T, V>*>(at) = lanes;
}

// V running maxima of one output pixel: the value at `position` of its window takes over
// where it is larger or NaN, as on the CPU; the first in-bounds element is always taken.
template <class T, class C, int V>
struct LaneMaxima {
  C best[V];
  int best_position[V];
  bool found = false;  // an in-bounds element was seen (by every lane alike)

  __device__ __forceinline__ LaneMaxima() {
#pragma unroll
    for (int lane = 0; lane < V; ++lane) {
      best[lane] = -static_cast<C>(INFINITY);
      best_position[lane] = -1;
    }
  }

  __device__ __forceinline__ void take(const AlignedVector<T, V>& values, int position) {
#pragma unroll
    for (int lane = 0; lane < V; ++lane) {
      C value = to_compute<C>(values.value[lane]);
      if (!found || value > best[lane] || is_nan(value)) {
        best[lane] = value;
        best_position[lane] = position;
      }
    }
    found = true;
  }
};

// One thread per V adjacent channels of one output pixel (V > 1: channel stride 1 in every
// tensor); each lane keeps its own maximum. kSide > 0: the window is kSide x kSide with
// dilation 1, fixed at compile time, and every load of it is issued before the first
// comparison. NOTE: with the window's size known only at run time, each load waits for
// the comparisons before it; ResNet-50's stem pooling (3x3, fp16 channels-last, 128 x 64 x
// 112 x 112) took 131 us on an H200 that way and 106 us with its nine loads in flight (a
// standalone probe, 2026-12-03). Index: int32_t when the input and output have < 2^31
// elements.
template <class T, class C, int V, int kSide, class Index>
__global__ void max_pool2d_kernel(const T* input, Strides4<Index> in_strides, MaxWindow window,
                                  ElementOrder out_order, Strides4<Index> out_strides, int64_t total, T* output,
                                  uint8_t* window_indices) {
  wait_for_previous_kernel();
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    Coordinates<Index> at = out_order(static_cast<Index>(i));  // (n, c / V, oh, ow)
    Index channel = at.c * V;
    const T* plane = input + at.n * in_strides.n + channel * in_strides.c;
    int h_start = static_cast<int>(at.h) * window.stride_h - window.pad_h;
    int w_start = static_cast<int>(at.w) * window.stride_w - window.pad_w;
    auto inside = [&](int h, int w) { return h >= 0 && h < window.height && w >= 0 && w < window.width; };
    auto load_at = [&](int h, int w) { return load_lanes<V>(plane + h * in_strides.h + w * in_strides.w); };
    LaneMaxima<T, C, V> maxima;
    if constexpr (kSide > 0) {
      AlignedVector<T, V> values[kSide][kSide];
#pragma unroll
      for (int r = 0; r < kSide; ++r) {
#pragma unroll
        for (int s = 0; s < kSide; ++s) {
          if (inside(h_start + r, w_start + s)) values[r][s] = load_at(h_start + r, w_start + s);
        }
      }
#pragma unroll
      for (int r = 0; r < kSide; ++r) {
#pragma unroll
        for (int s = 0; s < kSide; ++s) {
          if (inside(h_start + r, w_start + s)) maxima.take(values[r][s], r * kSide + s);
        }
      }
    } else {
      for (int r = 0; r < window.kernel_h; ++r) {
        int h = h_start + r * window.dilation_h;
        for (int s = 0; s < window.kernel_w; ++s) {
          int w = w_start + s * window.dilation_w;
          if (inside(h, w)) maxima.take(load_at(h, w), r * window.kernel_w + s);
        }
      }
    }
    AlignedVector<T, V> largest;
    AlignedVector<uint8_t, V> positions;
#pragma unroll
    for (int lane = 0; lane < V; ++lane) {
      largest.value[lane] = from_compute<T>(maxima.best[lane]);
      positions.value[lane] = static_cast<uint8_t>(maxima.best_position[lane] < 0 ? 0 : maxima.best_position[lane]);
    }
    Index out_at = out_strides.at(at.n, channel, at.h, at.w);
    store_lanes(output + out_at, largest);
    store_lanes(window_indices + out_at, positions);
  }
}

// Input columns a max pooling backward thread takes, side by side in one row. The outputs
// covering them are enumerated, and their window positions and gradients loaded, once for
// all of them: with ResNet's 3x3 stride-2 window one column is covered by 1.5 output
// columns on average, a pair of columns by 2. NOTE: with one pixel a thread, 64-bit
// offsets and divisions by the stride, ResNet-50's fp16 stem backward took 0.36 ms on an
// H200 against ~0.1 ms of memory traffic: it was bound by integer arithmetic. In NCHW, each
// of a warp's kTileColumns stores writes every other element of one span (L2 merges them).
constexpr int kTileColumns = 2;

// One thread per V adjacent channels (V > 1: channel stride 1 in every tensor) of up to
// kTileColumns adjacent pixels of one row; each lane of each pixel sums its own gradient.
// Index: int32_t when both tensors have < 2^31 elements (ElementOrder is then narrow),
// else int64_t. kDilated = false (dilation 1, the common case) drops the divisions by the
// dilation per candidate output.
template <class T, class C, int V, bool kDilated, class Index>
__global__ void max_pool2d_backward_kernel(const T* grad_output, const uint8_t* window_indices,
                                           Strides4<Index> out_strides, MaxWindow window, ElementOrder tile_order,
                                           Strides4<Index> in_strides, int64_t total, T* grad_input) {
  wait_for_previous_kernel();
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    Coordinates<Index> at = tile_order(static_cast<Index>(i));  // (n, c / V, h, w / kTileColumns)
    Index channel = at.c * V;
    int h = static_cast<int>(at.h);
    int w_first = static_cast<int>(at.w) * kTileColumns;
    int columns = min(kTileColumns, window.width - w_first);
    int oh_first = first_covering(h, window.kernel_h, window.stride_h_divider, window.pad_h, window.dilation_h);
    int oh_last = last_covering(h, window.stride_h_divider, window.pad_h, window.out_height);
    int ow_first = first_covering(w_first, window.kernel_w, window.stride_w_divider, window.pad_w, window.dilation_w);
    int ow_last = last_covering(w_first + columns - 1, window.stride_w_divider, window.pad_w, window.out_width);
    int column_span = (window.kernel_w - 1) * window.dilation_w;  // of a window's column offsets
    Index out_plane = at.n * out_strides.n + channel * out_strides.c;
    C accumulated[kTileColumns][V];
#pragma unroll
    for (int t = 0; t < kTileColumns; ++t) {
#pragma unroll
      for (int lane = 0; lane < V; ++lane) accumulated[t][lane] = 0;
    }
    // Outputs in ascending (oh, ow) order: the CPU's scatter order, so each pixel's sums
    // match it exactly.
    for (int oh = oh_first; oh <= oh_last; ++oh) {
      int row_offset = h + window.pad_h - oh * window.stride_h;  // r * dilation_h
      if (kDilated && row_offset % window.dilation_h != 0) continue;
      int row_position = (kDilated ? row_offset / window.dilation_h : row_offset) * window.kernel_w;
      Index out_row = out_plane + oh * out_strides.h;
      for (int ow = ow_first; ow <= ow_last; ++ow) {
        // Loaded even where no lane takes them: a test per candidate costs more than the
        // load (from L2, mostly: neighbouring tiles read the same outputs).
        Index out_at = out_row + ow * out_strides.w;
        AlignedVector<uint8_t, V> positions = load_lanes<V>(window_indices + out_at);
        AlignedVector<T, V> grads = load_lanes<V>(grad_output + out_at);
        C values[V];
#pragma unroll
        for (int lane = 0; lane < V; ++lane) values[lane] = to_compute<C>(grads.value[lane]);
#pragma unroll
        for (int t = 0; t < kTileColumns; ++t) {
          int column_offset = w_first + t + window.pad_w - ow * window.stride_w;  // s * dilation_w if covered
          bool covered = t < columns && column_offset >= 0 && column_offset <= column_span &&
                         (!kDilated || column_offset % window.dilation_w == 0);
          if (!covered) continue;
          int position = row_position + (kDilated ? column_offset / window.dilation_w : column_offset);
#pragma unroll
          for (int lane = 0; lane < V; ++lane) {
            if (positions.value[lane] == position) accumulated[t][lane] += values[lane];
          }
        }
      }
    }
    Index in_at = in_strides.at(at.n, channel, h, w_first);
#pragma unroll
    for (int t = 0; t < kTileColumns; ++t) {
      if (t >= columns) break;
      AlignedVector<T, V> sums;
#pragma unroll
      for (int lane = 0; lane < V; ++lane) sums.value[lane] = from_compute<T>(accumulated[t][lane]);
      store_lanes(grad_input + in_at + t * in_strides.w, sums);
    }
  }
}

template <class T, class C>
__global__ void avg_pool2d_kernel(const T* input, Strides4<> in_strides, PlaneSizes sizes, Window2d window,
                                  ElementOrder out_order, Strides4<> out_strides, int64_t total, T* output) {
  wait_for_previous_kernel();
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    Coordinates at = out_order(i);  // (n, c, oh, ow)
    AvgWindow box = avg_window(window, sizes.height, sizes.width, at.h, at.w);
    C sum = 0;
    for (int64_t h = box.h_start; h < box.h_end; ++h)
      for (int64_t w = box.w_start; w < box.w_end; ++w) sum += to_compute<C>(input[in_strides.at(at.n, at.c, h, w)]);
    output[out_strides.at(at.n, at.c, at.h, at.w)] = from_compute<T>(box.divisor > 0 ? sum / C(box.divisor) : C(0));
  }
}

// One thread per V adjacent channels of one input pixel (V > 1: channel stride 1 in every
// tensor), each lane with its own sum. (With one element a thread, the backward of
// ResNet-50's global pool, 7x7 x 2048 at batch 128 in fp16, took 0.17 ms on an H200.)
template <class T, class C, int V>
__global__ void avg_pool2d_backward_kernel(const T* grad_output, Strides4<> out_strides, PlaneSizes sizes,
                                           Window2d window, ElementOrder in_order, Strides4<> in_strides,
                                           int64_t total, T* grad_input) {
  wait_for_previous_kernel();
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    Coordinates at = in_order(i);  // (n, c / V, h, w)
    int64_t channel = at.c * V;
    // Candidate outputs: those whose unclipped window [o * stride - pad, + kernel) holds
    // the element; the exact clipped window is checked below.
    int64_t padded_h = at.h + window.pad_h, padded_w = at.w + window.pad_w;
    int64_t oh_first = padded_h < window.kernel_h ? 0 : (padded_h - window.kernel_h) / window.stride_h + 1;
    int64_t ow_first = padded_w < window.kernel_w ? 0 : (padded_w - window.kernel_w) / window.stride_w + 1;
    int64_t oh_last = min(padded_h / window.stride_h, sizes.out_height - 1);
    int64_t ow_last = min(padded_w / window.stride_w, sizes.out_width - 1);
    C accumulated[V];
#pragma unroll
    for (int lane = 0; lane < V; ++lane) accumulated[lane] = 0;
    for (int64_t oh = oh_first; oh <= oh_last; ++oh) {
      for (int64_t ow = ow_first; ow <= ow_last; ++ow) {
        AvgWindow box = avg_window(window, sizes.height, sizes.width, oh, ow);
        if (box.divisor <= 0 || at.h < box.h_start || at.h >= box.h_end || at.w < box.w_start || at.w >= box.w_end) {
          continue;
        }
        AlignedVector<T, V> grads = load_lanes<V>(grad_output + out_strides.at(at.n, channel, oh, ow));
#pragma unroll
        for (int lane = 0; lane < V; ++lane) accumulated[lane] += to_compute<C>(grads.value[lane]) / C(box.divisor);
      }
    }
    AlignedVector<T, V> sums;
#pragma unroll
    for (int lane = 0; lane < V; ++lane) sums.value[lane] = from_compute<T>(accumulated[lane]);
    store_lanes(grad_input + in_strides.at(at.n, channel, at.h, at.w), sums);
  }
}

// Whether `tensor` holds every `width` adjacent channels of a pixel, starting at a channel
// that is a multiple of `width`, as one vector aligned to `width` elements. A dim of size 1
// has no step, whatever its stride: a global pool's (N, C, 1, 1) gradient arrives dense in
// NCHW, strides (C, 1, 1, 1), and holds its pixels' channels as vectors all the same.
bool holds_channel_vectors(const Tensor& tensor, int width) {
  const Shape& sizes = tensor.sizes();
  const Shape& strides = tensor.strides();
  auto steps_whole_vectors = [&](int dim) { return sizes[dim] == 1 || strides[dim] % width == 0; };
  return strides[1] == 1 && sizes[1] % width == 0 && steps_whole_vectors(0) && steps_whole_vectors(2) &&
         steps_whole_vectors(3) && is_aligned(tensor.raw_data(), tensor.element_size() * width);
}

// The channels a max pooling thread takes: the widest of max_width, max_width / 2, ..., 1
// that every tensor holds as aligned vectors (channels-last with C a multiple of it); 1 in
// NCHW. The uint8 window positions count too: their V bytes are one store.
template <class... Tensors>
int channel_vector_width(int max_width, const Tensors&... tensors) {
  int width = max_width;
  while (width > 1 && !(holds_channel_vectors(tensors, width) && ...)) width /= 2;
  return width;
}

// Calls launch.template operator()<kFlag>() with kFlag = flag.
template <class Launch>
void with_flag(bool flag, Launch&& launch) {
  if (flag) {
    launch.template operator()<true>();
  } else {
    launch.template operator()<false>();
  }
}

// Calls launch.template operator()<V>() with V = width, a power of two <= kMaxWidth.
template <int kMaxWidth, class Launch>
void with_vector_width(int width, Launch&& launch) {
  if constexpr (kMaxWidth > 1) {
    if (width < kMaxWidth) return with_vector_width<kMaxWidth / 2>(width, launch);
  }
  launch.template operator()<kMaxWidth>();
}

}  // namespace

void max_pool2d(const Tensor& input, const Window2d& window, const Tensor& output, const Tensor& window_indices) {
  if (output.numel() == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  PlaneSizes sizes = plane_sizes(input, output);
  bool narrow = input.numel() <= INT32_MAX && output.numel() <= INT32_MAX;
  bool undilated = window.dilation_h == 1 && window.dilation_w == 1;
  // The windows of ResNet's stem (3x3) and of LeNet-style halving (2x2), fixed at compile time.
  int side = narrow && undilated && window.kernel_h == window.kernel_w && (window.kernel_h == 2 || window.kernel_h == 3)
                 ? static_cast<int>(window.kernel_h)
                 : 0;
  dispatch_floating(input.dtype(), "max_pool2d", [&]<class Element>() {
    using T = device_t<Element>;
    using C = pool_compute_t<Element>;
    constexpr int kMaxWidth = vector_width_v<T>;
    int width = channel_vector_width(kMaxWidth, input, output, window_indices);
    with_vector_width<kMaxWidth>(width, [&]<int V>() {
      int64_t items = output.numel() / V;
      LaunchConfig launch = launch_config(items);
      auto run = [&]<int kSide, class Index>() {
        launch_dependent(max_pool2d_kernel<T, C, V, kSide, Index>, launch.blocks, launch.threads, 0, stream, device,
                         static_cast<const T*>(input.raw_data()), strides_of<Index>(input), max_window(window, sizes),
                         element_order(output, V), strides_of<Index>(output), items,
                         static_cast<T*>(output.raw_data()), static_cast<uint8_t*>(window_indices.raw_data()));
      };
      if (side == 3) {
        run.template operator()<3, int32_t>();
      } else if (side == 2) {
        run.template operator()<2, int32_t>();
      } else if (narrow) {
        run.template operator()<0, int32_t>();
      } else {
        run.template operator()<0, int64_t>();
      }
    });
  });
}

void max_pool2d_backward(const Tensor& grad_output, const Tensor& window_indices, const Window2d& window,
                         const Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  Device device = grad_input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  PlaneSizes sizes = plane_sizes(grad_input, grad_output);
  bool dilated = window.dilation_h != 1 || window.dilation_w != 1;
  bool narrow = grad_input.numel() <= INT32_MAX && grad_output.numel() <= INT32_MAX;
  dispatch_floating(grad_output.dtype(), "max_pool2d backward", [&]<class Element>() {
    using T = device_t<Element>;
    constexpr int kMaxWidth = vector_width_v<T>;
    int width = channel_vector_width(kMaxWidth, grad_output, window_indices, grad_input);
    with_vector_width<kMaxWidth>(width, [&]<int V>() {
      ElementOrder tile_order = element_order(grad_input, V, kTileColumns);
      int64_t items = grad_input.sizes()[0] * tile_order.channels * tile_order.rows * tile_order.columns;
      LaunchConfig shape = launch_config(items);
      with_flag(dilated, [&]<bool kDilated>() {
        with_flag(narrow, [&]<bool kNarrow>() {
          using Index = std::conditional_t<kNarrow, int32_t, int64_t>;
          launch_dependent(max_pool2d_backward_kernel<T, pool_compute_t<Element>, V, kDilated, Index>, shape.blocks,
                           shape.threads, 0, stream, device, static_cast<const T*>(grad_output.raw_data()),
                           static_cast<const uint8_t*>(window_indices.raw_data()), strides_of<Index>(grad_output),
                           max_window(window, sizes), tile_order, strides_of<Index>(grad_input), items,
                           static_cast<T*>(grad_input.raw_data()));
        });
      });
    });
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
    launch_dependent(avg_pool2d_kernel<T, pool_compute_t<Element>>, launch.blocks, launch.threads, 0, stream, device,
                     static_cast<const T*>(input.raw_data()), strides_of(input), sizes, window, element_order(output),
                     strides_of(output), output.numel(), static_cast<T*>(output.raw_data()));
  });
}

void avg_pool2d_backward(const Tensor& grad_output, const Window2d& window, const Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  Device device = grad_input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  PlaneSizes sizes = plane_sizes(grad_input, grad_output);
  dispatch_floating(grad_output.dtype(), "avg_pool2d backward", [&]<class Element>() {
    using T = device_t<Element>;
    constexpr int kMaxWidth = vector_width_v<T>;
    int width = channel_vector_width(kMaxWidth, grad_output, grad_input);
    with_vector_width<kMaxWidth>(width, [&]<int V>() {
      int64_t items = grad_input.numel() / V;
      LaunchConfig launch = launch_config(items);
      launch_dependent(avg_pool2d_backward_kernel<T, pool_compute_t<Element>, V>, launch.blocks, launch.threads, 0,
                       stream, device, static_cast<const T*>(grad_output.raw_data()), strides_of(grad_output), sizes,
                       window, element_order(grad_input, V), strides_of(grad_input), items,
                       static_cast<T*>(grad_input.raw_data()));
    });
  });
}

}  // namespace mg::cuda
