// cuda/kernels/conv.cu — CUDA 2-D convolution: the kernel table's conv entries, which run
// cuDNN (cuda/cudnn/conv.cpp) when memgrad is built with it and cudnn_enabled(), and
// otherwise the im2col + cuBLAS kernels below — the reference the cuDNN path is tested
// against, so it stays in every build.
//
// The im2col path is the algorithm of core/cpu/conv.cpp: per sample, an im2col kernel lays
// out the windows as columns (C*R*S, P*Q), and one cublasGemmStridedBatchedEx multiplies
// every group at once (batch = groups; group g's weight, columns and output are fixed
// strides apart). Backward input: grad_columns = weight^T @ grad_output, then a col2im
// kernel in which each thread owns one input element and sums the column entries that
// touch it, so no atomics are needed and the result is deterministic. Backward weight
// accumulates grad_output @ columns^T over the samples with beta = 1.
// The column buffer (one sample's worth) comes from the caching allocator tagged WORKSPACE.
// NOTE: the im2col kernels index NCHW only. channels_last tensors (which the table's
// contract allows) get NCHW copies, and a channels_last result is computed into an NCHW
// temporary and copied back: a reference path, not a fast one — channels_last speed is
// cuDNN's job.
//
// Row-major to column-major (as cuda/matmul.cpp): a row-major (M, N) result C = A @ B is
// the column-major (N, M) matrix C^T = B^T A^T, so cuBLAS gets B first, then A.
#include <algorithm>
#include <climits>

#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/blas_handle.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"
#if MG_WITH_CUDNN
#include "memgrad/cuda/cudnn/conv.h"
#endif

namespace mg::cuda {

namespace {

struct ConvGeometry {
  int64_t batch, channels, height, width;    // input (N, C, H, W)
  int64_t out_channels, kernel_h, kernel_w;  // weight (K, C/g, R, S)
  int64_t out_h, out_w;                      // output (N, K, P, Q)
  int64_t groups;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
};

ConvGeometry geometry(const Shape& input, const Shape& weight, const Shape& output, const Window2d& window) {
  return {input[0],  input[1],        input[2],        input[3],     weight[0],    weight[2],
          weight[3], output[2],       output[3],       window.groups, window.stride_h, window.stride_w,
          window.pad_h, window.pad_w, window.dilation_h, window.dilation_w};
}

// columns (C*R*S, P*Q) of one sample's input (C, H, W); zeros over the padding.
template <class T>
__global__ void im2col_kernel(const T* __restrict__ input, ConvGeometry g, T* __restrict__ columns) {
  int64_t cols = g.out_h * g.out_w;
  int64_t total = g.channels * g.kernel_h * g.kernel_w * cols;
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    int64_t q = i % g.out_w, p = (i / g.out_w) % g.out_h;
    int64_t row = i / cols;
    int64_t s = row % g.kernel_w, r = (row / g.kernel_w) % g.kernel_h, c = row / (g.kernel_w * g.kernel_h);
    int64_t h = p * g.stride_h - g.pad_h + r * g.dilation_h;
    int64_t w = q * g.stride_w - g.pad_w + s * g.dilation_w;
    bool inside = h >= 0 && h < g.height && w >= 0 && w < g.width;
    columns[i] = inside ? input[(c * g.height + h) * g.width + w] : from_compute<T>(0.0f);
  }
}

// grad_input (C, H, W) of one sample from its grad_columns (C*R*S, P*Q): each thread sums,
// for its element, the (r, s) taps whose window lands on it at a whole output position,
// starting from the element's own value when `accumulate`.
template <class T>
__global__ void col2im_kernel(const T* __restrict__ columns, ConvGeometry g, bool accumulate,
                              T* __restrict__ grad_input) {
  using C = device_compute_t<T>;
  int64_t cols = g.out_h * g.out_w;
  int64_t total = g.channels * g.height * g.width;
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    int64_t w = i % g.width, h = (i / g.width) % g.height, c = i / (g.width * g.height);
    C sum = accumulate ? to_compute<C>(grad_input[i]) : C(0);
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      int64_t h_offset = h + g.pad_h - r * g.dilation_h;  // = p * stride_h
      if (h_offset < 0 || h_offset % g.stride_h != 0) continue;
      int64_t p = h_offset / g.stride_h;
      if (p >= g.out_h) continue;
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        int64_t w_offset = w + g.pad_w - s * g.dilation_w;
        if (w_offset < 0 || w_offset % g.stride_w != 0) continue;
        int64_t q = w_offset / g.stride_w;
        if (q >= g.out_w) continue;
        sum += to_compute<C>(columns[((c * g.kernel_h + r) * g.kernel_w + s) * cols + p * g.out_w + q]);
      }
    }
    grad_input[i] = from_compute<T>(sum);
  }
}

// output (N, K, P*Q) += bias[k].
template <class T>
__global__ void add_bias_kernel(T* __restrict__ output, const T* __restrict__ bias, int64_t channels,
                                int64_t plane, int64_t total) {
  using C = device_compute_t<T>;
  for (int64_t i = global_thread_index(); i < total; i += grid_stride()) {
    int64_t k = (i / plane) % channels;
    output[i] = from_compute<T>(to_compute<C>(output[i]) + to_compute<C>(bias[k]));
  }
}

cudaDataType_t blas_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float64: return CUDA_R_64F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default: break;
  }
  MG_CHECK(false, "conv2d on CUDA: expected a floating dtype, got ", dtype);
}

int as_blas_int(int64_t value) {
  MG_CHECK(value <= INT_MAX, "conv2d on CUDA: a matrix dimension (", value, ") exceeds cuBLAS's 32-bit limit");
  return static_cast<int>(value);
}

// Row-major C (M, N) = alpha * op(A) @ op(B) + beta * C, batched `batches` times with the
// given element strides between batches. A is stored (M, K) or, transposed, (K, M); B is
// stored (K, N) or, transposed, (N, K); all densely packed.
struct Gemm {
  cublasHandle_t handle;
  DType dtype;
  void run(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t a_stride,
           const void* b, int64_t b_stride, void* c, int64_t c_stride, int64_t batches, bool accumulate) const {
    cudaDataType_t type = blas_type(dtype);
    cublasComputeType_t compute = dtype == DType::Float64                    ? CUBLAS_COMPUTE_64F
                                  : dtype == DType::Float32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                            : CUBLAS_COMPUTE_32F;
    const double alpha_double = 1.0, beta_double = accumulate ? 1.0 : 0.0;
    const float alpha_float = 1.0f, beta_float = accumulate ? 1.0f : 0.0f;
    const void* alpha = dtype == DType::Float64 ? static_cast<const void*>(&alpha_double) : &alpha_float;
    const void* beta = dtype == DType::Float64 ? static_cast<const void*>(&beta_double) : &beta_float;
    // Column-major view: C^T (N, M) = op(B)^T (N, K) @ op(A)^T (K, M). A row-major stored
    // matrix is its column-major transpose with leading dimension = its row length.
    int64_t ldb = transpose_b ? k : n;
    int64_t lda = transpose_a ? m : k;
    MG_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, as_blas_int(n),
        as_blas_int(m), as_blas_int(k), alpha, b, type, as_blas_int(ldb), static_cast<long long>(b_stride), a, type,
        as_blas_int(lda), static_cast<long long>(a_stride), beta, c, type, as_blas_int(n),
        static_cast<long long>(c_stride), as_blas_int(batches), compute, CUBLAS_GEMM_DEFAULT));
  }
};

// Everything one call needs on the device: guard, stream, handle, one sample's columns.
struct ConvContext {
  DeviceGuard guard;
  cudaStream_t stream;
  Gemm gemm;
  Tensor columns;  // (C*R*S, P*Q), WORKSPACE
  ConvContext(Device device, DType dtype, const ConvGeometry& g)
      : guard(device), stream(current_stream(device)), gemm{blas_handle(device, stream), dtype} {
    columns = empty({g.channels * g.kernel_h * g.kernel_w, g.out_h * g.out_w},
                    {.dtype = dtype, .device = device, .category = MemoryCategory::Workspace});
  }
};

size_t element_size(const Tensor& t) { return t.nbytes() / std::max<int64_t>(t.numel(), 1); }

void im2col_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
                   const Tensor& output) {
  ConvGeometry g = geometry(input.sizes(), weight.sizes(), output.sizes(), window);
  if (output.numel() == 0) return;
  ConvContext context(output.device(), output.dtype(), g);
  int64_t c_group = g.channels / g.groups, k_group = g.out_channels / g.groups;
  int64_t rows = c_group * g.kernel_h * g.kernel_w, cols = g.out_h * g.out_w;
  size_t bytes = element_size(output);
  dispatch_floating(output.dtype(), "conv2d", [&]<class T>() {
    using D = device_t<T>;
    const char* in = static_cast<const char*>(input.raw_data());
    char* out = static_cast<char*>(output.raw_data());
    LaunchConfig config = launch_config(g.channels * g.kernel_h * g.kernel_w * cols);
    for (int64_t n = 0; n < g.batch; ++n) {
      im2col_kernel<D><<<config.blocks, config.threads, 0, context.stream>>>(
          reinterpret_cast<const D*>(in + n * g.channels * g.height * g.width * bytes), g,
          device_data<T>(context.columns));
      MG_CUDA_CHECK_LAUNCH();
      // out_n[group] (K/g, P*Q) = weight[group] (K/g, C/g*R*S) @ columns[group] (C/g*R*S, P*Q)
      context.gemm.run(false, false, k_group, cols, rows, weight.raw_data(), k_group * rows,
                       context.columns.raw_data(), rows * cols, out + n * g.out_channels * cols * bytes,
                       k_group * cols, g.groups, false);
    }
    if (bias.defined()) {
      LaunchConfig bias_config = launch_config(output.numel());
      add_bias_kernel<D><<<bias_config.blocks, bias_config.threads, 0, context.stream>>>(
          device_data<T>(output), device_data<T>(bias), g.out_channels, cols, output.numel());
      MG_CUDA_CHECK_LAUNCH();
    }
  });
}

void im2col_conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                                  const Tensor& grad_input, bool accumulate) {
  ConvGeometry g = geometry(grad_input.sizes(), weight.sizes(), grad_output.sizes(), window);
  if (grad_input.numel() == 0) return;
  ConvContext context(grad_input.device(), grad_input.dtype(), g);
  int64_t c_group = g.channels / g.groups, k_group = g.out_channels / g.groups;
  int64_t rows = c_group * g.kernel_h * g.kernel_w, cols = g.out_h * g.out_w;
  size_t bytes = element_size(grad_input);
  dispatch_floating(grad_input.dtype(), "conv2d_backward_input", [&]<class T>() {
    using D = device_t<T>;
    const char* grad_out = static_cast<const char*>(grad_output.raw_data());
    char* grad_in = static_cast<char*>(grad_input.raw_data());
    LaunchConfig config = launch_config(g.channels * g.height * g.width);
    for (int64_t n = 0; n < g.batch; ++n) {
      // columns[group] (C/g*R*S, P*Q) = weight[group]^T @ grad_out_n[group] (K/g, P*Q)
      context.gemm.run(true, false, rows, cols, k_group, weight.raw_data(), k_group * rows,
                       grad_out + n * g.out_channels * cols * bytes, k_group * cols, context.columns.raw_data(),
                       rows * cols, g.groups, false);
      col2im_kernel<D><<<config.blocks, config.threads, 0, context.stream>>>(
          device_data<T>(context.columns), g, accumulate,
          reinterpret_cast<D*>(grad_in + n * g.channels * g.height * g.width * bytes));
      MG_CUDA_CHECK_LAUNCH();
    }
  });
}

void im2col_conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                                   const Tensor& grad_weight) {
  ConvGeometry g = geometry(input.sizes(), grad_weight.sizes(), grad_output.sizes(), window);
  if (grad_weight.numel() == 0) return;
  ConvContext context(grad_weight.device(), grad_weight.dtype(), g);
  if (g.batch == 0 || grad_output.numel() == 0) {
    MG_CUDA_CHECK(cudaMemsetAsync(grad_weight.raw_data(), 0, grad_weight.nbytes(), context.stream));
    return;
  }
  int64_t c_group = g.channels / g.groups, k_group = g.out_channels / g.groups;
  int64_t rows = c_group * g.kernel_h * g.kernel_w, cols = g.out_h * g.out_w;
  size_t bytes = element_size(grad_weight);
  dispatch_floating(grad_weight.dtype(), "conv2d_backward_weight", [&]<class T>() {
    using D = device_t<T>;
    const char* in = static_cast<const char*>(input.raw_data());
    const char* grad_out = static_cast<const char*>(grad_output.raw_data());
    LaunchConfig config = launch_config(g.channels * g.kernel_h * g.kernel_w * cols);
    for (int64_t n = 0; n < g.batch; ++n) {
      im2col_kernel<D><<<config.blocks, config.threads, 0, context.stream>>>(
          reinterpret_cast<const D*>(in + n * g.channels * g.height * g.width * bytes), g,
          device_data<T>(context.columns));
      MG_CUDA_CHECK_LAUNCH();
      // grad_weight[group] (K/g, C/g*R*S) (+)= grad_out_n[group] (K/g, P*Q) @ columns[group]^T
      context.gemm.run(false, true, k_group, rows, cols, grad_out + n * g.out_channels * cols * bytes,
                       k_group * cols, context.columns.raw_data(), rows * cols, grad_weight.raw_data(),
                       k_group * rows, g.groups, n > 0);
    }
  });
}

// `tensor` itself when NCHW-contiguous, else an NCHW copy (WORKSPACE) — or, for a result
// (`with_values` false), an uninitialised NCHW tensor that finish() copies back.
Tensor as_nchw(const Tensor& tensor, bool with_values) {
  if (!tensor.defined() || tensor.is_contiguous()) return tensor;
  Tensor result = empty(tensor.sizes(),
                        {.dtype = tensor.dtype(), .device = tensor.device(), .category = MemoryCategory::Workspace});
  if (with_values) copy(tensor, result);
  return result;
}
void finish(const Tensor& computed, const Tensor& result) {
  if (!computed.is_same(result)) copy(computed, result);
}

}  // namespace

void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
            const Tensor& output) {
#if MG_WITH_CUDNN
  if (cudnn::conv_usable(input, weight, output)) return cudnn::conv2d(input, weight, bias, window, output);
#endif
  Tensor result = as_nchw(output, false);
  im2col_conv2d(as_nchw(input, true), as_nchw(weight, true), bias, window, result);
  finish(result, output);
}

void conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                           const Tensor& grad_input, bool accumulate) {
#if MG_WITH_CUDNN
  if (cudnn::conv_usable(grad_input, weight, grad_output)) {
    return cudnn::conv2d_backward_input(grad_output, weight, window, grad_input, accumulate);
  }
#endif
  Tensor result = as_nchw(grad_input, /*with_values=*/accumulate);
  im2col_conv2d_backward_input(as_nchw(grad_output, true), as_nchw(weight, true), window, result, accumulate);
  finish(result, grad_input);
}

void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight) {
#if MG_WITH_CUDNN
  if (cudnn::conv_usable(input, grad_weight, grad_output)) {
    return cudnn::conv2d_backward_weight(grad_output, input, window, grad_weight);
  }
#endif
  Tensor result = as_nchw(grad_weight, false);
  im2col_conv2d_backward_weight(as_nchw(grad_output, true), as_nchw(input, true), window, result);
  finish(result, grad_weight);
}

// Only cuDNN fuses the statistics into the convolution; the im2col path does not. And only
// where it pays: with a multiple of kFusedStatisticsChannelMultiple input channels.
// NOTE: measured on the H200 (docs/history/benchmarks.md, 2026-12-02, 8f74ff5): ResNet-50's
// stem (3 input channels) has no fused engine but a runtime-compiled generic one
// (convFwd_genStats), 1.71 ms a step against 0.21 ms for its plain convolution's
// image-first-layer kernel; every other ResNet-50 convolution fuses at about its plain
// kernel's time, and sparing their statistics passes saves more than the stem costs.
constexpr int64_t kFusedStatisticsChannelMultiple = 8;

bool conv2d_with_statistics(const Tensor& input, const Tensor& weight, const Window2d& window, const Tensor& output,
                            const Tensor& sum, const Tensor& square_sum) {
#if MG_WITH_CUDNN
  if (input.dim() != 4 || input.size(1) % kFusedStatisticsChannelMultiple != 0) return false;
  return cudnn::conv2d_with_statistics(input, weight, window, output, sum, square_sum);
#else
  return false;
#endif
}

// Only cuDNN fuses batch norm's backward sums into the backward data, and only for what its
// graph takes: 16-bit data dense in channels_last, and batch norm's per-channel tensors in
// float32 (batch_norm_relu's under autocast); and only where it pays, with at least
// kFusedBackwardMinValues values a channel. Anything else is false, for the caller to run
// the pieces apart.
// NOTE: measured on the H200 at batch 128 (docs/history/benchmarks.md, 2026-12-02,
// 7596c42-9104aab, [fusion-timing]): the fused kernel costs 7-49 µs more than the plain
// backward data, which the saved summing pass repays where a channel has 100,000 values or
// more (ResNet-50's 56x56 and 28x28 stages: 7-22 µs saved a convolution) and not at 25,000
// or fewer (14x14, 7x7: -4 to +5 µs). There the fused plans' larger workspace also raised
// ResNet-18's peak by 7.8 MiB (1%).
constexpr int64_t kFusedBackwardMinValues = int64_t{1} << 16;

bool conv2d_backward_input_relu_batch_norm(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                                           const Tensor& bn_input, const Tensor& mean, const Tensor& invstd,
                                           const Tensor& bn_weight, const Tensor& bn_bias, const Tensor& grad_input,
                                           const Tensor& coefficients, const Tensor& grad_bn_weight,
                                           const Tensor& grad_bn_bias) {
#if MG_WITH_CUDNN
  const DType dtype = grad_input.dtype();
  if (!is_16_bit_float(dtype)) return false;
  if (bn_input.dim() != 4 || bn_input.numel() / std::max<int64_t>(bn_input.size(1), 1) < kFusedBackwardMinValues) {
    return false;
  }
  for (const Tensor* data : {&grad_output, &weight, &bn_input, &grad_input}) {
    if (data->dtype() != dtype || data->dim() != 4 || !is_contiguous_in(*data, MemoryFormat::ChannelsLast)) {
      return false;
    }
  }
  for (const Tensor* per_channel : {&mean, &invstd, &bn_weight, &bn_bias}) {
    if (!per_channel->defined() || per_channel->dtype() != DType::Float32 || !per_channel->is_contiguous()) {
      return false;
    }
  }
  return cudnn::conv2d_backward_input_relu_batch_norm(
      grad_output, weight, window, {bn_input, mean, invstd, bn_weight, bn_bias}, grad_input,
      {grad_bn_weight, grad_bn_bias, coefficients.select(0, 0), coefficients.select(0, 1), coefficients.select(0, 2)});
#else
  return false;
#endif
}

}  // namespace mg::cuda
