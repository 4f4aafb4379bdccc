// core/cpu/conv.cpp — CPU 2-D convolution (NCHW) through im2col and Eigen's GEMM.
//
// For one sample and one group, the convolution is a matrix product:
//   output (K/g, P*Q) = weight (K/g, C/g*R*S) @ columns (C/g*R*S, P*Q)
// where each column holds the input values one output position's window sees (zeros
// where the window hangs over the padding). Backward reuses the same layout:
//   grad_columns = weight^T @ grad_output, scattered back to the input (col2im), and
//   grad_weight += grad_output @ columns^T, summed over the batch.
// Samples are spread over OpenMP threads; each thread owns one column buffer, allocated
// once per call as WORKSPACE so memory reports show what the convolution borrows.
// NOTE: with one sample the loop stays serial (`if (threads > 1)`), so the one GEMM per
// group keeps Eigen's own threads instead of running inside a one-thread team.
// 16-bit inputs compute in float32 and round once at the end, as matmul does.
// NOTE: the loops index NCHW only. The kernel table also hands over channels_last tensors;
// they get NCHW copies and a channels_last result is computed in NCHW and copied back
// (dispatch below). The CPU path is the reference the CUDA paths are checked against, not
// a fast path, so one extra copy per channels_last operand is the price of one algorithm.
#include <Eigen/Core>
#include <omp.h>

#include <algorithm>

#include "memgrad/core/cpu/conv_scratch.h"
#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/factory.h"

namespace mg::cpu {

namespace {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;
template <class T>
using ConstMatrixMap = Eigen::Map<const RowMatrix<T>>;

// Every size the loops need, read once from the tensors.
struct ConvGeometry {
  int64_t batch, channels, height, width;              // input (N, C, H, W)
  int64_t out_channels, kernel_h, kernel_w;            // weight (K, C/g, R, S)
  int64_t out_h, out_w;                                // output (N, K, P, Q)
  int64_t groups;
  int64_t group_channels() const { return channels / groups; }          // C/g
  int64_t group_out_channels() const { return out_channels / groups; }  // K/g
  int64_t column_rows() const { return group_channels() * kernel_h * kernel_w; }
  int64_t column_cols() const { return out_h * out_w; }
};

ConvGeometry geometry(const Shape& input, const Shape& weight, const Shape& output, const Window2d& window) {
  return {input[0], input[1], input[2], input[3], weight[0], weight[2], weight[3], output[2], output[3],
          window.groups};
}

// The outputs i in [0, count) whose input coordinate i * stride + offset lies inside
// [0, extent), as the range [begin, end): the window positions that see input, not padding.
struct InsideRange {
  int64_t begin, end;
};
InsideRange inside_range(int64_t offset, int64_t stride, int64_t extent, int64_t count) {
  // First i with i * stride + offset >= 0, and first i with i * stride + offset >= extent.
  auto first_reaching = [&](int64_t bound) {
    int64_t needed = bound - offset;
    return needed <= 0 ? int64_t(0) : std::min(count, (needed + stride - 1) / stride);
  };
  int64_t begin = first_reaching(0);
  return {begin, std::max(begin, first_reaching(extent))};
}

// NOTE: im2col and col2im walk one (channel, r, s, output row) run at a time: the in-bounds
// rows and columns are found once per (r, s), so the inner loop is a plain copy (or add) that
// the compiler vectorizes, and zeros are written only where the window overhangs the padding.

// columns (C/g*R*S, P*Q) of one group's input (C/g, H, W).
template <class T>
void im2col(const T* input, const ConvGeometry& g, const Window2d& window, T* columns) {
  int64_t cols = g.column_cols();
  for (int64_t r = 0; r < g.kernel_h; ++r) {
    int64_t h_offset = r * window.dilation_h - window.pad_h;
    InsideRange rows = inside_range(h_offset, window.stride_h, g.height, g.out_h);
    for (int64_t s = 0; s < g.kernel_w; ++s) {
      int64_t w_offset = s * window.dilation_w - window.pad_w;
      InsideRange span = inside_range(w_offset, window.stride_w, g.width, g.out_w);
      for (int64_t c = 0; c < g.group_channels(); ++c) {
        T* row = columns + ((c * g.kernel_h + r) * g.kernel_w + s) * cols;
        std::fill(row, row + rows.begin * g.out_w, T(0));
        std::fill(row + rows.end * g.out_w, row + cols, T(0));
        for (int64_t p = rows.begin; p < rows.end; ++p) {
          T* out = row + p * g.out_w;
          const T* in = input + (c * g.height + p * window.stride_h + h_offset) * g.width;
          std::fill(out, out + span.begin, T(0));
          std::fill(out + span.end, out + g.out_w, T(0));
          if (window.stride_w == 1) {
            std::copy(in + span.begin + w_offset, in + span.end + w_offset, out + span.begin);
          } else {
            for (int64_t q = span.begin; q < span.end; ++q) out[q] = in[q * window.stride_w + w_offset];
          }
        }
      }
    }
  }
}

// Adds columns (C/g*R*S, P*Q) back into one group's input gradient (C/g, H, W).
template <class T>
void col2im_add(const T* columns, const ConvGeometry& g, const Window2d& window, T* grad_input) {
  int64_t cols = g.column_cols();
  for (int64_t c = 0; c < g.group_channels(); ++c) {
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      int64_t h_offset = r * window.dilation_h - window.pad_h;
      InsideRange rows = inside_range(h_offset, window.stride_h, g.height, g.out_h);
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        int64_t w_offset = s * window.dilation_w - window.pad_w;
        InsideRange span = inside_range(w_offset, window.stride_w, g.width, g.out_w);
        const T* row = columns + ((c * g.kernel_h + r) * g.kernel_w + s) * cols;
        for (int64_t p = rows.begin; p < rows.end; ++p) {
          const T* __restrict in = row + p * g.out_w;
          T* __restrict out = grad_input + (c * g.height + p * window.stride_h + h_offset) * g.width;
          if (window.stride_w == 1) {
            for (int64_t q = span.begin; q < span.end; ++q) out[q + w_offset] += in[q];
          } else {
            for (int64_t q = span.begin; q < span.end; ++q) out[q * window.stride_w + w_offset] += in[q];
          }
        }
      }
    }
  }
}

// Threads worth starting for `batch` samples.
int thread_count(int64_t batch) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), batch)));
}
Tensor workspace(const Shape& sizes, DType dtype) {
  return empty(sizes, {.dtype = dtype, .category = MemoryCategory::Workspace});
}

template <class T>
void conv2d_typed(const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
                  const Tensor& output) {
  ConvGeometry g = geometry(input.sizes(), weight.sizes(), output.sizes(), window);
  int64_t rows = g.column_rows(), cols = g.column_cols(), k_group = g.group_out_channels();
  int threads = thread_count(g.batch);
  Tensor buffers = workspace(conv_scratch_shapes(input.sizes(), weight.sizes(), output.sizes(), window).column_buffers,
                             dtype_of<T>);
  const T* in = input.data_ptr<T>();
  const T* w = weight.data_ptr<T>();
  const T* b = bias.defined() ? bias.data_ptr<T>() : nullptr;
  T* out = output.data_ptr<T>();
  T* all_columns = buffers.data_ptr<T>();
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t n = 0; n < g.batch; ++n) {
    T* columns = all_columns + omp_get_thread_num() * rows * cols;
    for (int64_t group = 0; group < g.groups; ++group) {
      im2col(in + (n * g.channels + group * g.group_channels()) * g.height * g.width, g, window, columns);
      MatrixMap<T> result(out + (n * g.out_channels + group * k_group) * cols, k_group, cols);
      result.noalias() = ConstMatrixMap<T>(w + group * k_group * rows, k_group, rows) *
                         ConstMatrixMap<T>(columns, rows, cols);
    }
    if (b) {
      for (int64_t k = 0; k < g.out_channels; ++k) {
        T* plane = out + (n * g.out_channels + k) * cols;
        for (int64_t i = 0; i < cols; ++i) plane[i] += b[k];
      }
    }
  }
}

template <class T>
void backward_input_typed(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                          const Tensor& grad_input, bool accumulate) {
  ConvGeometry g = geometry(grad_input.sizes(), weight.sizes(), grad_output.sizes(), window);
  int64_t rows = g.column_rows(), cols = g.column_cols(), k_group = g.group_out_channels();
  int threads = thread_count(g.batch);
  Tensor buffers = workspace(
      conv_scratch_shapes(grad_input.sizes(), weight.sizes(), grad_output.sizes(), window).column_buffers,
      dtype_of<T>);
  const T* grad_out = grad_output.data_ptr<T>();
  const T* w = weight.data_ptr<T>();
  T* grad_in = grad_input.data_ptr<T>();
  T* all_columns = buffers.data_ptr<T>();
  if (!accumulate) std::fill(grad_in, grad_in + grad_input.numel(), T(0));  // col2im adds
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t n = 0; n < g.batch; ++n) {
    T* columns = all_columns + omp_get_thread_num() * rows * cols;
    for (int64_t group = 0; group < g.groups; ++group) {
      MatrixMap<T>(columns, rows, cols).noalias() =
          ConstMatrixMap<T>(w + group * k_group * rows, k_group, rows).transpose() *
          ConstMatrixMap<T>(grad_out + (n * g.out_channels + group * k_group) * cols, k_group, cols);
      col2im_add(columns, g, window, grad_in + (n * g.channels + group * g.group_channels()) * g.height * g.width);
    }
  }
}

template <class T>
void backward_weight_typed(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                           const Tensor& grad_weight) {
  ConvGeometry g = geometry(input.sizes(), grad_weight.sizes(), grad_output.sizes(), window);
  int64_t rows = g.column_rows(), cols = g.column_cols(), k_group = g.group_out_channels();
  int threads = thread_count(g.batch);
  const ConvScratchShapes scratch = conv_scratch_shapes(input.sizes(), grad_weight.sizes(), grad_output.sizes(), window);
  Tensor buffers = workspace(scratch.column_buffers, dtype_of<T>);
  // NOTE: each thread sums its own samples into a private (K, C/g*R*S) partial, and the
  // partials are added at the end: no locks, and a deterministic result per thread count.
  Tensor partials = zeros(scratch.weight_partials, {.dtype = dtype_of<T>, .category = MemoryCategory::Workspace});
  const T* grad_out = grad_output.data_ptr<T>();
  const T* in = input.data_ptr<T>();
  T* all_columns = buffers.data_ptr<T>();
  T* all_partials = partials.data_ptr<T>();
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t n = 0; n < g.batch; ++n) {
    int thread = omp_get_thread_num();
    T* columns = all_columns + thread * rows * cols;
    T* partial = all_partials + thread * g.out_channels * rows;
    for (int64_t group = 0; group < g.groups; ++group) {
      im2col(in + (n * g.channels + group * g.group_channels()) * g.height * g.width, g, window, columns);
      MatrixMap<T>(partial + group * k_group * rows, k_group, rows).noalias() +=
          ConstMatrixMap<T>(grad_out + (n * g.out_channels + group * k_group) * cols, k_group, cols) *
          ConstMatrixMap<T>(columns, rows, cols).transpose();
    }
  }
  T* result = grad_weight.data_ptr<T>();
  int64_t count = g.out_channels * rows;
  for (int64_t i = 0; i < count; ++i) {
    T total = 0;
    for (int thread = 0; thread < threads; ++thread) total += all_partials[thread * count + i];
    result[i] = total;
  }
}

// Runs fn<T>(operands, result) in T = float64 for float64 results and float32 otherwise,
// on NCHW-contiguous tensors: an operand of another dtype or layout (16-bit, or
// channels_last) is converted first, and a result of another dtype or layout is computed
// into a temporary and converted back once (starting from the result's values when
// `result_is_read`: an accumulating kernel adds to them).
template <class Fn>
void dispatch(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& result, Fn&& fn,
              bool result_is_read = false) {
  MG_ASSERT(is_floating(result.dtype()), op, " on ", result.dtype());
  DType compute = result.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  auto prepared = [compute](const Tensor& t) {
    bool ready = !t.defined() || (t.dtype() == compute && t.is_contiguous());
    return ready ? t : converted_copy(t, compute, t.device());
  };
  bool direct = result.dtype() == compute && result.is_contiguous();
  Tensor computed = direct            ? result
                    : result_is_read ? converted_copy(result, compute, result.device())
                                     : empty(result.sizes(), {.dtype = compute});
  if (compute == DType::Float64) {
    fn.template operator()<double>(prepared(a), prepared(b), prepared(c), computed);
  } else {
    fn.template operator()<float>(prepared(a), prepared(b), prepared(c), computed);
  }
  if (!direct) copy(computed, result);
}

}  // namespace

ConvScratchShapes conv_scratch_shapes(const Shape& input, const Shape& weight, const Shape& output,
                                      const Window2d& window) {
  const ConvGeometry g = geometry(input, weight, output, window);
  const int64_t threads = thread_count(g.batch);
  return {{threads, g.column_rows(), g.column_cols()}, {threads, g.out_channels, g.column_rows()}};
}

void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
            const Tensor& output) {
  dispatch("conv2d", input, weight, bias, output,
           [&]<class T>(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out) {
             conv2d_typed<T>(x, w, b, window, out);
           });
}

void conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                           const Tensor& grad_input, bool accumulate) {
  dispatch(
      "conv2d_backward_input", grad_output, weight, Tensor(), grad_input,
      [&]<class T>(const Tensor& grad, const Tensor& w, const Tensor&, const Tensor& out) {
        backward_input_typed<T>(grad, w, window, out, accumulate);
      },
      /*result_is_read=*/accumulate);
}

void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight) {
  dispatch("conv2d_backward_weight", grad_output, input, Tensor(), grad_weight,
           [&]<class T>(const Tensor& grad, const Tensor& x, const Tensor&, const Tensor& out) {
             backward_weight_typed<T>(grad, x, window, out);
           });
}

// The CPU convolves and reduces apart: batch norm makes its own statistics here, and its
// own backward sums.
bool conv2d_with_statistics(const Tensor&, const Tensor&, const Window2d&, const Tensor&, const Tensor&,
                            const Tensor&) {
  return false;
}
bool conv2d_backward_input_relu_batch_norm(const Tensor&, const Tensor&, const Window2d&, const Tensor&,
                                           const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                           const Tensor&, const Tensor&, const Tensor&) {
  return false;
}

}  // namespace mg::cpu
