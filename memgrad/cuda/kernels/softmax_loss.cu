// cuda/kernels/softmax_loss.cu — CUDA softmax / log_softmax (forward and backward), the
// negative log-likelihood gather/scatter, and cross entropy fused from logits.
//
// As on the CPU (core/cpu/softmax_loss.cpp), a contiguous tensor seen along `dim` is
// (outer, extent, inner): element (o, k, i) sits at (o * extent + k) * inner + i, and each
// (o, i) line is independent. Lines are computed exactly as the CPU does: the maximum
// (shift 0 when it is infinite, so an all -inf line gives NaN as in PyTorch), the sum of
// exponentials, then the outputs; in float for float32/float16/bfloat16, double for float64.
//
//   inner == 1 (softmax over the last dim, the common case): a warp per line when
//     extent <= 1024, else a block of 512 threads per line. A line is read three times;
//     the second and third reads hit L1/L2.
//   inner > 1: blocks of 32 lines x 8 threads; the 32 lines are consecutive in memory
//     (coalesced), and the 8 threads of a line split its extent.
//
// Cross entropy's forward reads each row once (an online maximum and sum of exponentials,
// 16-byte loads), then one thread writes the row's log-sum-exp and loss. Its backward
// writes each gradient element once, exp(logit - log_sum_exp) minus the smoothed one-hot
// target, times the row's grad. 16-bit logits under autocast stay 16-bit: the arithmetic
// is float32 and the loss float32, but no float32 copy of the (N, C) logits is made.
//
// nll_forward and cross_entropy_forward never synchronise to validate targets: a target
// that is neither ignore_index nor in [0, C) gives a NaN loss (the CPU kernels throw
// instead), so a bad label shows up as a NaN loss rather than as silent garbage.
#include <algorithm>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/row_reduce.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

// What a line's arithmetic is carried out in.
template <class T>
using line_compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class C>
__device__ __forceinline__ C exp_of(C x) {
  if constexpr (std::is_same_v<C, double>) return ::exp(x);
  else return ::expf(x);
}
template <class C>
__device__ __forceinline__ C log_of(C x) {
  if constexpr (std::is_same_v<C, double>) return ::log(x);
  else return ::logf(x);
}

// std::max's rule, as the CPU uses: a NaN value never replaces the running maximum.
struct MaxOf {
  template <class C>
  __device__ __forceinline__ C operator()(C total, C value) const { return total < value ? value : total; }
};
struct SumOf {
  template <class C>
  __device__ __forceinline__ C operator()(C total, C value) const { return total + value; }
};

constexpr int kLinesPerBlock = 32;    // inner > 1: consecutive lines per block (threadIdx.x)
constexpr int kThreadsPerLine = 8;    // inner > 1: threads splitting a line's extent (threadIdx.y)

// Combines `value` over the kThreadsPerLine threads of a line (threadIdx.y) through
// `shared`; all of them get the result.
template <class T, class Fn>
__device__ __forceinline__ T reduce_across_line(T value, Fn combine, T (&shared)[kThreadsPerLine][kLinesPerBlock + 1]) {
  shared[threadIdx.y][threadIdx.x] = value;
  __syncthreads();
  if (threadIdx.y == 0) {
    for (int y = 1; y < kThreadsPerLine; ++y) value = combine(value, shared[y][threadIdx.x]);
    shared[0][threadIdx.x] = value;
  }
  __syncthreads();
  value = shared[0][threadIdx.x];
  __syncthreads();
  return value;
}

// ---- softmax forward ----

// One line's result from its max and sum: softmax or log_softmax.
template <class C, bool Log>
struct SoftmaxLine {
  C shift, total, log_total;
  __device__ __forceinline__ C operator()(C x) const {
    C shifted = x - shift;
    if constexpr (Log) return shifted - log_total;
    else return exp_of(shifted) / total;
  }
};

template <class T, class C, bool Log>
__global__ void softmax_rows_kernel(const T* input, int64_t rows, int64_t extent, T* output) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;  // a whole warp (several rows per block only with 32-thread rows)
  const T* in = input + row * extent;
  T* out = output + row * extent;
  C max_value = -std::numeric_limits<C>::infinity();
  for (int64_t k = threadIdx.x; k < extent; k += blockDim.x) max_value = MaxOf{}(max_value, to_compute<C>(in[k]));
  max_value = reduce_across_row(max_value, MaxOf{});
  C shift = isinf(max_value) ? C(0) : max_value;
  C total = 0;
  for (int64_t k = threadIdx.x; k < extent; k += blockDim.x) total += exp_of(to_compute<C>(in[k]) - shift);
  total = reduce_across_row(total, SumOf{});
  SoftmaxLine<C, Log> line{shift, total, log_of(total)};
  for (int64_t k = threadIdx.x; k < extent; k += blockDim.x) out[k] = from_compute<T>(line(to_compute<C>(in[k])));
}

template <class T, class C, bool Log>
__global__ void softmax_lines_kernel(const T* input, int64_t extent, int64_t inner, T* output) {
  __shared__ C shared[kThreadsPerLine][kLinesPerBlock + 1];
  int64_t chunks = (inner + kLinesPerBlock - 1) / kLinesPerBlock;
  int64_t o = blockIdx.x / chunks;
  int64_t i = (blockIdx.x - o * chunks) * kLinesPerBlock + threadIdx.x;
  bool valid = i < inner;  // invalid threads still take part in the block's barriers
  int64_t base = o * extent * inner + i;
  C max_value = -std::numeric_limits<C>::infinity();
  if (valid) {
    for (int64_t k = threadIdx.y; k < extent; k += kThreadsPerLine) {
      max_value = MaxOf{}(max_value, to_compute<C>(input[base + k * inner]));
    }
  }
  max_value = reduce_across_line(max_value, MaxOf{}, shared);
  C shift = isinf(max_value) ? C(0) : max_value;
  C total = 0;
  if (valid) {
    for (int64_t k = threadIdx.y; k < extent; k += kThreadsPerLine) total += exp_of(to_compute<C>(input[base + k * inner]) - shift);
  }
  total = reduce_across_line(total, SumOf{}, shared);
  if (!valid) return;
  SoftmaxLine<C, Log> line{shift, total, log_of(total)};
  for (int64_t k = threadIdx.y; k < extent; k += kThreadsPerLine) {
    output[base + k * inner] = from_compute<T>(line(to_compute<C>(input[base + k * inner])));
  }
}

// ---- softmax backward ----
// softmax: dx = y * (g - sum(g * y));  log_softmax: dx = g - exp(y) * sum(g)

template <class C, bool Log>
__device__ __forceinline__ C backward_term(C g, C y) {
  if constexpr (Log) return g;
  else return g * y;
}
template <class C, bool Log>
__device__ __forceinline__ C backward_result(C g, C y, C dot) {
  if constexpr (Log) return g - exp_of(y) * dot;
  else return y * (g - dot);
}

template <class T, class C, bool Log>
__global__ void softmax_backward_rows_kernel(const T* grad_output, const T* output, int64_t rows, int64_t extent,
                                             T* grad_input) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const T* grad = grad_output + row * extent;
  const T* out = output + row * extent;
  T* result = grad_input + row * extent;
  C dot = 0;
  for (int64_t k = threadIdx.x; k < extent; k += blockDim.x) dot += backward_term<C, Log>(to_compute<C>(grad[k]), to_compute<C>(out[k]));
  dot = reduce_across_row(dot, SumOf{});
  for (int64_t k = threadIdx.x; k < extent; k += blockDim.x) {
    result[k] = from_compute<T>(backward_result<C, Log>(to_compute<C>(grad[k]), to_compute<C>(out[k]), dot));
  }
}

template <class T, class C, bool Log>
__global__ void softmax_backward_lines_kernel(const T* grad_output, const T* output, int64_t extent, int64_t inner,
                                              T* grad_input) {
  __shared__ C shared[kThreadsPerLine][kLinesPerBlock + 1];
  int64_t chunks = (inner + kLinesPerBlock - 1) / kLinesPerBlock;
  int64_t o = blockIdx.x / chunks;
  int64_t i = (blockIdx.x - o * chunks) * kLinesPerBlock + threadIdx.x;
  bool valid = i < inner;
  int64_t base = o * extent * inner + i;
  C dot = 0;
  if (valid) {
    for (int64_t k = threadIdx.y; k < extent; k += kThreadsPerLine) {
      int64_t at = base + k * inner;
      dot += backward_term<C, Log>(to_compute<C>(grad_output[at]), to_compute<C>(output[at]));
    }
  }
  dot = reduce_across_line(dot, SumOf{}, shared);
  if (!valid) return;
  for (int64_t k = threadIdx.y; k < extent; k += kThreadsPerLine) {
    int64_t at = base + k * inner;
    grad_input[at] = from_compute<T>(backward_result<C, Log>(to_compute<C>(grad_output[at]), to_compute<C>(output[at]), dot));
  }
}

// ---- launching ----

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Grid and block of a *_rows_kernel: a warp per line when lines are short, else a block.
struct RowLaunch {
  dim3 grid, block;
};
RowLaunch row_launch(const char* op, int64_t rows, int64_t extent) {
  int threads_x = extent <= 1024 ? 32 : 512;
  int rows_per_block = threads_x == 32 ? 8 : 1;
  int64_t blocks = ceil_div(rows, rows_per_block);
  MG_CHECK(blocks <= std::numeric_limits<int32_t>::max(), op, ": ", rows, " lines are too many for one launch");
  return {dim3(static_cast<unsigned>(blocks)), dim3(threads_x, rows_per_block)};
}
// Grid and block of a *_lines_kernel.
RowLaunch line_launch(const char* op, const LinesAlong& lines) {
  int64_t blocks = lines.outer * ceil_div(lines.inner, kLinesPerBlock);
  MG_CHECK(blocks <= std::numeric_limits<int32_t>::max(), op, ": ", lines.outer * lines.inner,
           " lines are too many for one launch");
  return {dim3(static_cast<unsigned>(blocks)), dim3(kLinesPerBlock, kThreadsPerLine)};
}

// Calls fn.template operator()<Log>() with `log` as a compile-time constant.
template <class Fn>
void with_log(bool log, Fn&& fn) {
  if (log) fn.template operator()<true>();
  else fn.template operator()<false>();
}

}  // namespace

void softmax(const Tensor& input, int dim, bool log, const Tensor& output) {
  if (input.numel() == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  LinesAlong lines = lines_along(input.sizes(), dim);
  dispatch_floating(input.dtype(), "softmax", [&]<class Element>() {
    using T = device_t<Element>;
    using C = line_compute_t<Element>;
    const T* in = static_cast<const T*>(input.raw_data());
    T* out = static_cast<T*>(output.raw_data());
    with_log(log, [&]<bool Log>() {
      if (lines.inner == 1) {
        RowLaunch launch = row_launch("softmax", lines.outer, lines.extent);
        softmax_rows_kernel<T, C, Log><<<launch.grid, launch.block, 0, stream>>>(in, lines.outer, lines.extent, out);
      } else {
        RowLaunch launch = line_launch("softmax", lines);
        softmax_lines_kernel<T, C, Log><<<launch.grid, launch.block, 0, stream>>>(in, lines.extent, lines.inner, out);
      }
      MG_CUDA_CHECK_LAUNCH();
    });
  });
}

void softmax_backward(const Tensor& grad_output, const Tensor& output, int dim, bool log, const Tensor& grad_input) {
  if (output.numel() == 0) return;
  Device device = output.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  LinesAlong lines = lines_along(output.sizes(), dim);
  dispatch_floating(output.dtype(), "softmax backward", [&]<class Element>() {
    using T = device_t<Element>;
    using C = line_compute_t<Element>;
    const T* grad = static_cast<const T*>(grad_output.raw_data());
    const T* out = static_cast<const T*>(output.raw_data());
    T* result = static_cast<T*>(grad_input.raw_data());
    with_log(log, [&]<bool Log>() {
      if (lines.inner == 1) {
        RowLaunch launch = row_launch("softmax backward", lines.outer, lines.extent);
        softmax_backward_rows_kernel<T, C, Log><<<launch.grid, launch.block, 0, stream>>>(grad, out, lines.outer,
                                                                                          lines.extent, result);
      } else {
        RowLaunch launch = line_launch("softmax backward", lines);
        softmax_backward_lines_kernel<T, C, Log><<<launch.grid, launch.block, 0, stream>>>(grad, out, lines.extent,
                                                                                           lines.inner, result);
      }
      MG_CUDA_CHECK_LAUNCH();
    });
  });
}

// ---- negative log-likelihood ----

namespace {

// loss[n] = -log_probs[n, target[n]]; 0 where ignored; NaN where the target is out of range.
template <class T, class C>
__global__ void nll_forward_kernel(const T* log_probs, const int64_t* target, int64_t target_stride, int64_t batch,
                                   int64_t classes, int64_t ignore_index, T* loss, int64_t loss_stride) {
  for (int64_t n = global_thread_index(); n < batch; n += grid_stride()) {
    int64_t label = target[n * target_stride];
    C value = label == ignore_index             ? C(0)
              : label < 0 || label >= classes   ? std::numeric_limits<C>::quiet_NaN()
                                                : -to_compute<C>(log_probs[n * classes + label]);
    loss[n * loss_stride] = from_compute<T>(value);
  }
}

// Each thread writes one element of grad_input (N, C): -grad_loss[n] at the target's
// class, 0 elsewhere (so no separate zero fill, and each byte is written once).
template <class T, class C>
__global__ void nll_backward_kernel(const T* grad_loss, int64_t grad_stride, const int64_t* target,
                                    int64_t target_stride, int64_t batch, int64_t classes, int64_t ignore_index,
                                    T* grad_input) {
  int64_t total = batch * classes;
  for (int64_t index = global_thread_index(); index < total; index += grid_stride()) {
    int64_t n = index / classes, c = index - n * classes;
    int64_t label = target[n * target_stride];
    C value = label == c && label != ignore_index ? -to_compute<C>(grad_loss[n * grad_stride]) : C(0);
    grad_input[index] = from_compute<T>(value);
  }
}

}  // namespace

void nll_forward(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, const Tensor& loss) {
  int64_t batch = log_probs.sizes()[0], classes = log_probs.sizes()[1];
  if (batch == 0) return;
  Device device = log_probs.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_floating(log_probs.dtype(), "nll_loss", [&]<class Element>() {
    using T = device_t<Element>;
    using C = line_compute_t<Element>;
    LaunchConfig config = launch_config(batch);
    nll_forward_kernel<T, C><<<config.blocks, config.threads, 0, stream>>>(
        static_cast<const T*>(log_probs.raw_data()), static_cast<const int64_t*>(target.raw_data()),
        target.strides()[0], batch, classes, ignore_index, static_cast<T*>(loss.raw_data()), loss.strides()[0]);
    MG_CUDA_CHECK_LAUNCH();
  });
}

void nll_backward(const Tensor& grad_loss, const Tensor& target, int64_t ignore_index, const Tensor& grad_input) {
  int64_t batch = grad_input.sizes()[0], classes = grad_input.sizes()[1];
  if (batch * classes == 0) return;
  Device device = grad_input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_floating(grad_input.dtype(), "nll_loss backward", [&]<class Element>() {
    using T = device_t<Element>;
    using C = line_compute_t<Element>;
    LaunchConfig config = launch_config(batch * classes);  // grid-stride loop
    nll_backward_kernel<T, C><<<config.blocks, config.threads, 0, stream>>>(
        static_cast<const T*>(grad_loss.raw_data()), grad_loss.strides()[0],
        static_cast<const int64_t*>(target.raw_data()), target.strides()[0], batch, classes, ignore_index,
        static_cast<T*>(grad_input.raw_data()));
    MG_CUDA_CHECK_LAUNCH();
  });
}

// ---- cross entropy ----

namespace {

// A row's running statistics, read once: its maximum so far (std::max's rule), the sum of
// exp(x - maximum) over the elements seen, and their plain sum (for label smoothing).
template <class C>
struct RowStats {
  C max_value, total, sum;
};
template <class C>
__device__ __forceinline__ RowStats<C> shuffle_xor(RowStats<C> stats, int lane_mask) {
  // NOTE: qualified, as this overload hides row_reduce.cuh's from unqualified lookup here.
  return {mg::cuda::shuffle_xor(stats.max_value, lane_mask), mg::cuda::shuffle_xor(stats.total, lane_mask),
          mg::cuda::shuffle_xor(stats.sum, lane_mask)};
}
// stats.total as if taken relative to `max_value` (>= stats.max_value).
template <class C>
__device__ __forceinline__ C total_relative_to(const RowStats<C>& stats, C max_value) {
  // NOTE: equal maxima (an all -inf part included) need no factor, and exp(-inf - -inf)
  // would be NaN.
  return stats.max_value == max_value ? stats.total : stats.total * exp_of(stats.max_value - max_value);
}
struct CombineRowStats {
  template <class C>
  __device__ __forceinline__ RowStats<C> operator()(const RowStats<C>& a, const RowStats<C>& b) const {
    C max_value = MaxOf{}(a.max_value, b.max_value);
    return {max_value, total_relative_to(a, max_value) + total_relative_to(b, max_value), a.sum + b.sum};
  }
};

// One row (or a warp's rows) per block as softmax_rows_kernel, but the row is read once:
// each thread keeps RowStats over V-element vectors, rescaling its total when its maximum
// grows, and the threads' stats are combined. Only a row whose maximum is infinite is read
// again, to sum exp(x) with a shift of 0 as the CPU does. L is the loss's type: T, or C for
// 16-bit logits under autocast.
template <class T, class C, class L, int V>
__global__ void cross_entropy_rows_kernel(const T* logits, const int64_t* target, int64_t rows, int64_t classes,
                                          int64_t ignore_index, C smoothing, L* loss, C* log_sum_exp) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;  // a whole warp (several rows per block only with 32-thread rows)
  const T* in = logits + row * classes;
  constexpr C kMinusInfinity = -std::numeric_limits<C>::infinity();
  RowStats<C> stats{kMinusInfinity, C(0), C(0)};
  for (int64_t k = static_cast<int64_t>(threadIdx.x) * V; k < classes; k += static_cast<int64_t>(blockDim.x) * V) {
    AlignedVector<T, V> pack = *reinterpret_cast<const AlignedVector<T, V>*>(in + k);
    C x[V];
    C pack_max = kMinusInfinity;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      x[i] = to_compute<C>(pack.value[i]);
      pack_max = MaxOf{}(pack_max, x[i]);
    }
    if (pack_max > stats.max_value) {
      stats.total *= exp_of(stats.max_value - pack_max);
      stats.max_value = pack_max;
    }
#pragma unroll
    for (int i = 0; i < V; ++i) {
      stats.total += x[i] == kMinusInfinity ? C(0) : exp_of(x[i] - stats.max_value);
      stats.sum += x[i];
    }
  }
  stats = reduce_across_row(stats, CombineRowStats{});
  C shift = stats.max_value, total = stats.total;
  if (isinf(shift)) {  // the same for every thread of the row
    shift = C(0);
    total = C(0);
    for (int64_t k = threadIdx.x; k < classes; k += blockDim.x) total += exp_of(to_compute<C>(in[k]));
    total = reduce_across_row(total, SumOf{});
  }
  if (threadIdx.x != 0) return;
  C log_total = log_of(total);
  log_sum_exp[row] = shift + log_total;
  int64_t label = target[row];
  C value;
  if (label == ignore_index) {
    value = C(0);
  } else if (label < 0 || label >= classes) {
    value = std::numeric_limits<C>::quiet_NaN();
  } else {
    // -(1 - s) log_p[target] - s mean_c log_p[c], with log_p = shifted - log_total.
    C target_term = log_total - (to_compute<C>(in[label]) - shift);
    C shifted_sum = stats.sum - shift * static_cast<C>(classes);
    value = smoothing == C(0) ? target_term
                              : (C(1) - smoothing) * target_term + smoothing * (log_total - shifted_sum / classes);
  }
  loss[row] = from_compute<L>(value);
}

// Rows laid out as the forward's; each thread writes V consecutive elements of
// grad_logits at a time: exp(logit - log_sum_exp) minus the smoothed one-hot target,
// times the row's grad.
template <class T, class C, class L, int V>
__global__ void cross_entropy_backward_kernel(const L* grad_loss, const T* logits, const C* log_sum_exp,
                                              const int64_t* target, int64_t rows, int64_t classes,
                                              int64_t ignore_index, C kept, C uniform, T* grad_logits) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const int64_t label = target[row];
  const bool ignored = label == ignore_index;
  const C grad = ignored ? C(0) : to_compute<C>(grad_loss[row]);
  const C row_log_sum_exp = log_sum_exp[row];
  const T* in = logits + row * classes;
  T* out = grad_logits + row * classes;
  for (int64_t k = static_cast<int64_t>(threadIdx.x) * V; k < classes; k += static_cast<int64_t>(blockDim.x) * V) {
    AlignedVector<T, V> pack = *reinterpret_cast<const AlignedVector<T, V>*>(in + k);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      C target_weight = (k + i == label ? kept : C(0)) + uniform;
      C probability = exp_of(to_compute<C>(pack.value[i]) - row_log_sum_exp);
      pack.value[i] = from_compute<T>(ignored ? C(0) : grad * (probability - target_weight));
    }
    *reinterpret_cast<AlignedVector<T, V>*>(out + k) = pack;
  }
}

// Calls fn.template operator()<L, V>(): L the loss's type (T, or C where the caller asked
// for float32 losses of 16-bit logits), V the elements per access (16 bytes when every row
// starts aligned, else 1).
template <class T, class C, class Fn>
void with_loss_type_and_width(DType logits_dtype, DType loss_dtype, int64_t classes,
                              std::initializer_list<const void*> rows_base, Fn&& fn) {
  constexpr int kWidth = vector_width_v<T>;
  bool vectorized = classes % kWidth == 0;
  for (const void* base : rows_base) vectorized = vectorized && is_aligned(base, sizeof(T) * kWidth);
  auto with_width = [&]<class L>() {
    if (vectorized) fn.template operator()<L, kWidth>();
    else fn.template operator()<L, 1>();
  };
  if (loss_dtype == logits_dtype) with_width.template operator()<T>();
  else with_width.template operator()<C>();
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index, double label_smoothing,
                           const Tensor& loss, const Tensor& log_sum_exp) {
  int64_t batch = logits.sizes()[0], classes = logits.sizes()[1];
  if (batch == 0) return;
  Device device = logits.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class Element>() {
    using T = device_t<Element>;
    using C = line_compute_t<Element>;
    RowLaunch launch = row_launch("cross_entropy", batch, classes);
    with_loss_type_and_width<T, C>(logits.dtype(), loss.dtype(), classes, {logits.raw_data()},
                                   [&]<class L, int V>() {
      cross_entropy_rows_kernel<T, C, L, V><<<launch.grid, launch.block, 0, stream>>>(
          static_cast<const T*>(logits.raw_data()), static_cast<const int64_t*>(target.raw_data()), batch, classes,
          ignore_index, static_cast<C>(label_smoothing), static_cast<L*>(loss.raw_data()),
          static_cast<C*>(log_sum_exp.raw_data()));
      MG_CUDA_CHECK_LAUNCH();
    });
  });
}

void cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& log_sum_exp,
                            const Tensor& target, int64_t ignore_index, double label_smoothing,
                            const Tensor& grad_logits) {
  int64_t batch = logits.sizes()[0], classes = logits.sizes()[1];
  if (batch * classes == 0) return;
  Device device = logits.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_floating(logits.dtype(), "cross_entropy backward", [&]<class Element>() {
    using T = device_t<Element>;
    using C = line_compute_t<Element>;
    // In C, as the CPU computes them.
    const C smoothing = static_cast<C>(label_smoothing), kept = C(1) - smoothing, uniform = smoothing / classes;
    RowLaunch launch = row_launch("cross_entropy backward", batch, classes);
    with_loss_type_and_width<T, C>(logits.dtype(), grad_loss.dtype(), classes,
                                   {logits.raw_data(), grad_logits.raw_data()}, [&]<class L, int V>() {
      cross_entropy_backward_kernel<T, C, L, V><<<launch.grid, launch.block, 0, stream>>>(
          static_cast<const L*>(grad_loss.raw_data()), static_cast<const T*>(logits.raw_data()),
          static_cast<const C*>(log_sum_exp.raw_data()), static_cast<const int64_t*>(target.raw_data()), batch,
          classes, ignore_index, kept, uniform, static_cast<T*>(grad_logits.raw_data()));
      MG_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace mg::cuda
