// cuda/kernels/batch_norm.cu — CUDA batch normalisation, forward (training and evaluation)
// and the training-mode backward, over (N, C) inputs and (N, C, H, W) inputs dense in NCHW
// or channels-last order; the output and grad_input share the input's layout.
//
// Every per-channel reduction (the statistics, and the backward's sum(g) and
// sum(g * (x - mean))) is cuda/kernels/channel_reduce.cuh's two-launch reduction over many
// blocks per channel, for NCHW and channels-last alike, into a WORKSPACE buffer; its
// finishing step runs here, on the device: statistics, running statistics and the batch
// counter, gradients of weight and bias, and the per-channel coefficients of the
// elementwise pass. Nothing waits for the host. The elementwise pass (normalise + affine,
// or grad_input) is one fused kernel, cuda/kernels/channel_map.cuh's, with 16-byte vector
// accesses when a vector never straddles two channels. Memory traffic: forward 2 reads +
// 1 write of the input's size, backward 2 reads of (x, grad) + 1 read of each for
// grad_input + 1 write.
//
// A ReLU may be fused after the normalisation (batch_norm_relu): the forward clamps its
// output, and the backward rebuilds the ReLU's mask from x and the saved statistics (the
// same fma on the same numbers as the forward, see affine()), so the fused op has the
// traffic above while a separate ReLU would add a read and a write of the activation
// forward and two reads and a write backward (ResNet-50 in float16: ~1.5 ms a step on an
// H200).
//
// A residual may be added before the ReLU (batch_norm_add_relu, a ResNet block's end):
// the normalising pass reads x and the residual and writes relu(y + residual), y never
// stored (forward: 3 reads + 1 write, against 4 + 2 for batch_norm then add_relu). The
// mask cannot be rebuilt from x then, so the backward reads it from the saved output: the
// summing pass reads grad, output and x and writes the masked gradient gz (the residual's
// gradient) at once, and the grad_input pass reads gz and x (backward: 5 reads + 2 writes,
// against 6 + 2 for add_relu's backward then batch_norm's).
//
// NOTE: numerics. The statistics are accumulated as shifted sums, sum(x - K) and
// sum((x - K)^2) with K = the channel's first value (float for float32 / 16-bit inputs,
// double for float64), and var = E[(x - K)^2] - E[x - K]^2. With K a value of the channel,
// |mean - K| is a few standard deviations at most, so the subtraction loses only a few
// bits, however large |mean| / std is (plain sum / sum-of-squares loses
// 2 log2(|mean| / std) bits and can go negative). The backward's sums are centred on the
// saved mean, and the elementwise passes compute (x - mean) * scale rather than
// x * scale + (bias - mean * scale), for the same reason; the forward's subtracts K and
// then mean - K, so the mean is not even rounded to the input's magnitude.
// Statistics given by a convolution's epilogue (kernels.h) are plain sums, K = 0: they
// lose those bits when |mean| >> std, the price of skipping the pass over the input. A
// convolution's output feeding a batch norm has |mean| of the order of its std.
//
// Per-channel tensors may have another dtype than the input (float32 statistics for a
// 16-bit input, a float32 weight), so they travel as ChannelValues (pointer + dtype) and are
// read through a switch that is uniform across a warp; the backward, whose reduction reads
// them per channel of each thread's vector, takes them as plain arrays of the accumulate
// dtype instead (BackwardChannels), converted first where they are not.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "memgrad/core/factory.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/channel_map.cuh"
#include "memgrad/cuda/kernels/channel_reduce.cuh"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/plan/batch_norm_workspace.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

using namespace channel_reduce;
using channel_map::launch_channel_map;

// ---- per-channel tensors of any floating dtype ----

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

// y = centred * scale + bias, one rounding: the fused ReLU's forward and backward both
// compute the pre-activation with this, from the same values, so its sign agrees exactly.
template <class A>
__device__ __forceinline__ A affine(A centred, A scale, A bias) {
  return ::fma(centred, scale, bias);
}

// NaN stays NaN, as PyTorch's relu.
template <class A>
__device__ __forceinline__ A relu(A y) {
  return y < A(0) ? A(0) : y;
}

template <class A>
__device__ __forceinline__ A inverse_sqrt(A x) {
  if constexpr (std::is_same_v<A, double>) return ::rsqrt(x);
  else return ::rsqrtf(x);
}

// The plan's dtype (cuda/plan/batch_norm_workspace.h) as a type.
template <class Element>
using accumulate_t = std::conditional_t<std::is_same_v<Element, double>, double, float>;
static_assert(dtype_of<accumulate_t<double>> == batch_norm_accumulate_dtype(DType::Float64) &&
              dtype_of<accumulate_t<float>> == batch_norm_accumulate_dtype(DType::Float32) &&
              dtype_of<accumulate_t<Half>> == batch_norm_accumulate_dtype(DType::Float16) &&
              dtype_of<accumulate_t<BFloat16>> == batch_norm_accumulate_dtype(DType::BFloat16));

// ---- what the per-channel sums add up (channel_reduce.cuh's Terms) ----

// The statistics: (x - K, (x - K)^2) with K the channel's first value (see the NOTE).
template <class T, class A>
struct StatisticsTerms {
  using Element = T;
  using Prepared = A;  // K
  const T* input;
  __device__ __forceinline__ A prepare(const Geometry& geometry, int64_t c) const {
    return to_compute<A>(input[geometry.offset(c, 0)]);
  }
  template <int kVec>
  __device__ __forceinline__ void add(const A (&shift)[kVec], int64_t at, A (&first)[kVec], A (&second)[kVec]) const {
    AlignedVector<T, kVec> x = load_vector<kVec>(input, at);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      A deviation = to_compute<A>(x.value[j]) - shift[j];
      first[j] += deviation;
      second[j] += deviation * deviation;
    }
  }
};

// A channel's forward map as the backward rebuilds it: mean, scale = invstd * weight
// (multiplied as the forward's finish does), and bias: the backward's coefficients [0],
// [1] and [4] (see FinishBackward).
template <class A>
struct ChannelMap {
  A mean, scale, bias;
};

// The per-channel tensors the backward reads, as plain arrays of A (batch_norm_backward
// converts any other dtype first, cuda/plan/batch_norm_workspace.h); no weight means 1, no
// bias 0.
// NOTE: plain arrays, not ChannelValues: their dtype switches, inlined into the unrolled
// reduction for each channel of a thread's vector, made nvcc spend minutes on this file.
template <class A>
struct BackwardChannels {
  const A* mean;
  const A* invstd;
  const A* weight;  // or null
  const A* bias;    // or null
  __device__ __forceinline__ ChannelMap<A> map(int64_t c) const {
    return {mean[c], invstd[c] * (weight != nullptr ? weight[c] : A(1)), bias != nullptr ? bias[c] : A(0)};
  }
};

// Where the backward finds the fused ReLU's mask, if the forward had one.
enum class ReluMask {
  None,
  FromInput,   // rebuilt: the pre-activation affine(x - mean) > 0 (batch_norm_relu)
  FromOutput,  // read: the forward's output > 0 (batch_norm_add_relu)
};

// The backward: (g, g * (x - mean)), with g masked by the fused ReLU: zero where the
// forward's pre-activation was not positive. With the mask from the output, the masked g
// (the residual's gradient) is stored to grad_residual too, when that is not null.
template <class T, class A, ReluMask kMask>
struct BackwardTerms {
  using Element = T;
  using Prepared = ChannelMap<A>;
  const T* input;
  const T* grad_output;
  const T* output;        // ReluMask::FromOutput only
  T* grad_residual;       // ReluMask::FromOutput only, or null
  BackwardChannels<A> channels;
  __device__ __forceinline__ Prepared prepare(const Geometry&, int64_t c) const { return channels.map(c); }
  template <int kVec>
  __device__ __forceinline__ void add(const Prepared (&map)[kVec], int64_t at, A (&first)[kVec],
                                      A (&second)[kVec]) const {
    AlignedVector<T, kVec> x = load_vector<kVec>(input, at);
    AlignedVector<T, kVec> g = load_vector<kVec>(grad_output, at);
    if constexpr (kMask == ReluMask::FromOutput) {
      AlignedVector<T, kVec> y = load_vector<kVec>(output, at);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        if (!(to_compute<A>(y.value[j]) > A(0))) g.value[j] = from_compute<T>(A(0));
      }
      if (grad_residual != nullptr) store_vector<kVec>(grad_residual, at, g);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      A centred = to_compute<A>(x.value[j]) - map[j].mean;
      A gradient = to_compute<A>(g.value[j]);
      if (kMask == ReluMask::FromInput && !(affine(centred, map[j].scale, map[j].bias) > A(0))) gradient = A(0);
      first[j] += gradient;
      second[j] += gradient * centred;
    }
  }
};

// ---- forward ----

// Per-channel coefficients of the normalising pass, y = ((x - K) - (mean - K)) * scale + bias
// with K the shift of the statistics (the mean in evaluation): x - K is exact for x near
// K, so the mean is never rounded to the input's magnitude. coefficients[0][c] = K,
// [1][c] = mean - K, [2][c] = scale = invstd * weight, [3][c] = bias.
// NOTE: with the fused ReLU and no residual, training takes K = the saved mean (so
// mean - K = 0): the backward rebuilds the mask from the saved statistics and must meet
// the same numbers. (With a residual the backward reads the mask from the output.)
template <class A>
__device__ __forceinline__ void store_forward_coefficients(A* coefficients, int64_t channels, int64_t c, A shift,
                                                           A shifted_mean, A invstd, A weight, A bias) {
  coefficients[c] = shift;
  coefficients[channels + c] = shifted_mean;
  coefficients[2 * channels + c] = invstd * weight;
  coefficients[3 * channels + c] = bias;
}

// Training: the statistics from the shifted sums, saved, folded into the running
// statistics, and turned into the coefficients; channel 0's finish also counts the batch
// (num_batches_tracked), so that the counter costs no launch of its own.
template <class T, class A>
struct FinishStatistics {
  const T* input;
  Geometry geometry;
  double momentum, eps;
  bool from_saved;  // normalise with the statistics as saved: K = the saved mean
  bool given;       // the sums are the caller's plain ones (kernels.h's statistics): K = 0
  ChannelValues save_mean, save_invstd, running_mean, running_var, weight, bias;
  A* coefficients;
  int64_t* batches_tracked;  // the 0-d num_batches_tracked, or null

  // What a channel's finish reads besides its sums (channel_reduce.cuh reads it early).
  struct Loaded {
    A shift, weight, bias;
    double running_mean, running_var;
  };
  __device__ __forceinline__ Loaded load(int64_t c) const {
    return {given ? A(0) : to_compute<A>(input[geometry.offset(c, 0)]), static_cast<A>(load_channel(weight, c, 1.0)),
            static_cast<A>(load_channel(bias, c, 0.0)), load_channel(running_mean, c, 0.0),
            load_channel(running_var, c, 1.0)};
  }

  __device__ __forceinline__ void operator()(int64_t c, const Loaded& loaded, A shifted_sum,
                                             A shifted_squares) const {
    A count = static_cast<A>(geometry.per_channel);
    A shift = loaded.shift;
    A shifted_mean = shifted_sum / count;
    A biased_var = max(shifted_squares / count - shifted_mean * shifted_mean, A(0));
    A mean = shift + shifted_mean;
    A invstd = inverse_sqrt(biased_var + static_cast<A>(eps));
    store_channel(save_mean, c, mean);
    store_channel(save_invstd, c, invstd);
    // The running variance estimates the population's, hence n / (n - 1) as in PyTorch.
    double n = static_cast<double>(geometry.per_channel);
    double unbiased_var = n > 1 ? static_cast<double>(biased_var) * n / (n - 1) : static_cast<double>(biased_var);
    if (running_mean.kind != ChannelKind::Absent) {
      store_channel(running_mean, c, (1 - momentum) * loaded.running_mean + momentum * mean);
    }
    if (running_var.kind != ChannelKind::Absent) {
      store_channel(running_var, c, (1 - momentum) * loaded.running_var + momentum * unbiased_var);
    }
    // Every channel is finished exactly once (finish_kernel, finish_given_statistics_kernel),
    // and training has at least one: channel 0's thread is the counter's only writer.
    if (c == 0 && batches_tracked != nullptr) *batches_tracked += 1;
    if (from_saved) {
      store_forward_coefficients(coefficients, geometry.channels, c, mean, A(0), invstd, loaded.weight, loaded.bias);
    } else {
      store_forward_coefficients(coefficients, geometry.channels, c, shift, shifted_mean, invstd, loaded.weight,
                                 loaded.bias);
    }
  }
};

// Training with the statistics given (a convolution's epilogue made them): the finishing
// step of the sums, one thread per channel, with no pass over the input.
template <class T, class A>
__global__ void finish_given_statistics_kernel(FinishStatistics<T, A> finish, const float* sum,
                                               const float* square_sum) {
  wait_for_previous_kernel();
  for (int64_t c = global_thread_index(); c < finish.geometry.channels; c += grid_stride()) {
    finish(c, finish.load(c), static_cast<A>(sum[c]), static_cast<A>(square_sum[c]));
  }
}

// Evaluation: the coefficients from the running statistics.
template <class A>
__global__ void eval_coefficients_kernel(int64_t channels, ChannelValues running_mean, ChannelValues running_var,
                                         double eps, ChannelValues weight, ChannelValues bias, A* coefficients) {
  for (int64_t c = global_thread_index(); c < channels; c += grid_stride()) {
    A invstd = inverse_sqrt(static_cast<A>(load_channel(running_var, c, 1.0)) + static_cast<A>(eps));
    store_forward_coefficients(coefficients, channels, c, static_cast<A>(load_channel(running_mean, c, 0.0)), A(0),
                               invstd, static_cast<A>(load_channel(weight, c, 1.0)),
                               static_cast<A>(load_channel(bias, c, 0.0)));
  }
}

// k: the channel's coefficients, k[i] = coefficients[i][c]; r: the residual's value when
// kResidual (added before the ReLU, in A: one rounding to T for the whole sum).
template <class T, class A, bool kRelu, bool kResidual>
struct NormaliseElement {
  static constexpr bool kReadsSecond = kResidual;
  static constexpr int kCoefficients = 4;
  __device__ __forceinline__ T operator()(const A (&k)[kCoefficients], T x, T r) const {
    A y = affine((to_compute<A>(x) - k[0]) - k[1], k[2], k[3]);
    if constexpr (kResidual) y += to_compute<A>(r);
    return from_compute<T>(kRelu ? relu(y) : y);
  }
};

// ---- backward ----

// Per-channel coefficients of grad_input: with xhat = (x - mean) * invstd and g the
// gradient reaching the normalisation (masked by the fused ReLU),
//   dx = w * invstd / n * (n * g - sum(g) - xhat * sum(g * xhat))
//      = g * [1] + (x - mean) * [2] + [3],
// coefficients[0][c] = mean, [1][c] = w * invstd, [2][c] = -w * invstd^3 * sum(g * (x - mean)) / n,
// [3][c] = -w * invstd * sum(g) / n, and for the ReLU's mask rebuilt from x [4][c] = bias.
template <class A>
struct FinishBackward {
  Geometry geometry;
  BackwardChannels<A> channels;
  ChannelValues grad_weight, grad_bias;
  A* coefficients;
  bool grad_input;  // whether grad_input is wanted

  // What a channel's finish reads besides its sums (channel_reduce.cuh reads it early).
  struct Loaded {
    ChannelMap<A> map;
    A invstd;
  };
  __device__ __forceinline__ Loaded load(int64_t c) const { return {channels.map(c), channels.invstd[c]}; }

  __device__ __forceinline__ void operator()(int64_t c, const Loaded& loaded, A sum_grad, A sum_grad_centred) const {
    A channel_invstd = loaded.invstd;
    store_channel(grad_bias, c, sum_grad);
    store_channel(grad_weight, c, sum_grad_centred * channel_invstd);
    if (!grad_input) return;
    const int64_t row = geometry.channels;  // coefficients[i][c] is at i * row + c
    A count = static_cast<A>(geometry.per_channel);
    A scale = loaded.map.scale;
    coefficients[c] = loaded.map.mean;
    coefficients[row + c] = scale;
    coefficients[2 * row + c] = -scale * channel_invstd * channel_invstd * sum_grad_centred / count;
    coefficients[3 * row + c] = -scale * sum_grad / count;
    coefficients[4 * row + c] = loaded.map.bias;
  }
};

// g: the gradient reaching the normalisation, masked here when kMaskFromInput (otherwise
// it comes masked: the residual's gradient that the summing pass stored).
template <class T, class A, bool kMaskFromInput>
struct GradInputElement {
  static constexpr bool kReadsSecond = true;
  static constexpr int kCoefficients = kMaskFromInput ? 5 : 4;
  __device__ __forceinline__ T operator()(const A (&k)[kCoefficients], T x, T g) const {
    A centred = to_compute<A>(x) - k[0];
    A gradient = to_compute<A>(g);
    if constexpr (kMaskFromInput) {
      if (!(affine(centred, k[1], k[4]) > A(0))) gradient = A(0);
    }
    return from_compute<T>(gradient * k[1] + centred * k[2] + k[3]);
  }
};

// grad_input from coefficients a convolution's fused backward formed (cuDNN's
// BN_BWD_WEIGHTS: k[0] * g + k[1] * x + k[2]), with g masked there already.
template <class T, class A>
struct GradFromCoefficientsElement {
  static constexpr bool kReadsSecond = true;
  static constexpr int kCoefficients = 3;
  __device__ __forceinline__ T operator()(const A (&k)[kCoefficients], T x, T g) const {
    return from_compute<T>(to_compute<A>(g) * k[0] + to_compute<A>(x) * k[1] + k[2]);
  }
};

}  // namespace

void batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, const Tensor& num_batches_tracked, bool training, double momentum,
                double eps, bool relu, const Tensor& residual, const ChannelSums& statistics, const Tensor& output,
                const Tensor& save_mean, const Tensor& save_invstd) {
  MG_ASSERT(relu || !residual.defined(), "batch_norm: a residual is fused only before a ReLU");
  MG_ASSERT(!statistics.defined() || (statistics.sum.dtype() == DType::Float32 &&
                                      statistics.square_sum.dtype() == DType::Float32),
            "batch_norm: given statistics are float32");
  MG_ASSERT(!num_batches_tracked.defined() ||
                (num_batches_tracked.dtype() == DType::Int64 && num_batches_tracked.numel() == 1 &&
                 num_batches_tracked.device() == input.device()),
            "batch_norm: num_batches_tracked is one int64 on the input's device (autograd/norm.cpp checks it)");
  const bool given = training && statistics.defined();
  int64_t total = input.numel();
  if (total == 0) return;
  Geometry geometry = geometry_of(input);
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_floating(input.dtype(), "batch_norm", [&]<class Element>() {
    using T = device_t<Element>;
    using A = accumulate_t<Element>;
    const T* in = static_cast<const T*>(input.raw_data());
    const T* added = residual.defined() ? static_cast<const T*>(residual.raw_data()) : nullptr;
    int64_t channels = geometry.channels;
    PartialGrid grid = partial_grid(geometry, sizeof(T), {in});
    // (5, C) coefficients, then (2, chunks, C) partial sums when training. Freed on this
    // stream once the kernels are queued: the caching allocator orders its reuse.
    Tensor workspace = empty({batch_norm_workspace_elements(channels, grid.chunks, /*with_partials=*/training && !given)},
                             {.dtype = dtype_of<A>, .device = device, .category = MemoryCategory::Workspace});
    A* coefficients = static_cast<A*>(workspace.raw_data());
    if (training) {
      FinishStatistics<T, A> finish{in,
                                    geometry,
                                    momentum,
                                    eps,
                                    /*from_saved=*/relu && added == nullptr,
                                    given,
                                    channel_values(save_mean),
                                    channel_values(save_invstd),
                                    channel_values(running_mean),
                                    channel_values(running_var),
                                    channel_values(weight),
                                    channel_values(bias),
                                    coefficients,
                                    num_batches_tracked.defined() ? num_batches_tracked.data_ptr<int64_t>() : nullptr};
      if (given) {
        LaunchConfig config = launch_config(channels);
        launch_dependent(finish_given_statistics_kernel<T, A>, config.blocks, config.threads, 0, stream, device,
                         finish, static_cast<const float*>(statistics.sum.raw_data()),
                         static_cast<const float*>(statistics.square_sum.raw_data()));
      } else {
        reduce_channels<A>(geometry, grid, StatisticsTerms<T, A>{in}, finish,
                           coefficients + kBatchNormCoefficients * channels, device, stream);
      }
    } else {
      LaunchConfig config = launch_config(channels);
      eval_coefficients_kernel<A><<<config.blocks, config.threads, 0, stream>>>(
          channels, channel_values(running_mean), channel_values(running_var), eps, channel_values(weight),
          channel_values(bias), coefficients);
      MG_CUDA_CHECK_LAUNCH();
    }
    auto normalise = [&]<bool kRelu, bool kResidual>() {
      launch_channel_map<T, A>(NormaliseElement<T, A, kRelu, kResidual>{}, geometry, total, coefficients, in, added,
                               static_cast<T*>(output.raw_data()), device, stream);
    };
    if (added != nullptr) {
      normalise.template operator()<true, true>();
    } else if (relu) {
      normalise.template operator()<true, false>();
    } else {
      normalise.template operator()<false, false>();
    }
  });
}

void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Tensor& save_mean, const Tensor& save_invstd, bool relu, const Tensor& output,
                         const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_residual) {
  MG_ASSERT(relu || !output.defined(), "batch_norm backward: the output is read only for a ReLU's mask");
  MG_ASSERT(!output.defined() || !grad_input.defined() || grad_residual.defined(),
            "batch_norm backward: grad_input from the output's mask needs grad_residual to read back");
  MG_ASSERT(output.defined() || !grad_residual.defined(), "batch_norm backward: grad_residual comes with output");
  int64_t total = input.numel();
  if (input.sizes()[1] == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  if (total == 0) {  // no values: the sums are zero
    if (grad_weight.defined()) fill(grad_weight, 0.0);
    if (grad_bias.defined()) fill(grad_bias, 0.0);
    return;
  }
  Geometry geometry = geometry_of(input);
  dispatch_floating(input.dtype(), "batch_norm backward", [&]<class Element>() {
    using T = device_t<Element>;
    using A = accumulate_t<Element>;
    const T* grad = static_cast<const T*>(grad_output.raw_data());
    const T* in = static_cast<const T*>(input.raw_data());
    const T* out = output.defined() ? static_cast<const T*>(output.raw_data()) : nullptr;
    T* through = grad_residual.defined() ? static_cast<T*>(grad_residual.raw_data()) : nullptr;
    int64_t channels = geometry.channels;
    PartialGrid grid = partial_grid(geometry, sizeof(T), {in, grad, out, through});
    // (5, C) coefficients, then (2, chunks, C) partial sums.
    Tensor workspace = empty({batch_norm_workspace_elements(channels, grid.chunks, /*with_partials=*/true)},
                             {.dtype = dtype_of<A>, .device = device, .category = MemoryCategory::Workspace});
    A* coefficients = static_cast<A*>(workspace.raw_data());
    const DType accumulate = dtype_of<A>;
    const Tensor mean_values = batch_norm_channel_operand(save_mean, accumulate);
    const Tensor invstd_values = batch_norm_channel_operand(save_invstd, accumulate);
    const Tensor weight_values = batch_norm_channel_operand(weight, accumulate);
    const Tensor bias_values = batch_norm_channel_operand(bias, accumulate);
    auto array_of = [](const Tensor& values) {
      return values.defined() ? static_cast<const A*>(values.raw_data()) : nullptr;
    };
    const BackwardChannels<A> per_channel{array_of(mean_values), array_of(invstd_values), array_of(weight_values),
                                          array_of(bias_values)};
    FinishBackward<A> finish{geometry, per_channel, channel_values(grad_weight), channel_values(grad_bias),
                             coefficients, grad_input.defined()};
    auto run = [&]<ReluMask kMask>() {
      BackwardTerms<T, A, kMask> terms{in, grad, out, through, per_channel};
      reduce_channels<A>(geometry, grid, terms, finish, coefficients + kBatchNormCoefficients * channels, device,
                         stream);
      if (!grad_input.defined()) return;
      // With the mask from the output, the gradient comes back masked from grad_residual:
      // one read instead of grad's and the output's.
      constexpr bool kMaskFromInput = kMask == ReluMask::FromInput;
      launch_channel_map<T, A>(GradInputElement<T, A, kMaskFromInput>{}, geometry, total, coefficients, in,
                               kMask == ReluMask::FromOutput ? through : grad,
                               static_cast<T*>(grad_input.raw_data()), device, stream);
    };
    if (out != nullptr) {
      run.template operator()<ReluMask::FromOutput>();
    } else if (relu) {
      run.template operator()<ReluMask::FromInput>();
    } else {
      run.template operator()<ReluMask::None>();
    }
  });
}

void batch_norm_backward_from_coefficients(const Tensor& grad, const Tensor& input, const Tensor& coefficients,
                                           const Tensor& grad_input) {
  const int64_t total = input.numel();
  if (total == 0) return;
  Geometry geometry = geometry_of(input);
  Device device = input.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_floating(input.dtype(), "batch_norm backward from coefficients", [&]<class Element>() {
    using T = device_t<Element>;
    using A = accumulate_t<Element>;
    // float32 coefficients, as the fused convolutions write them; float64 data (A double)
    // reads a converted copy.
    const Tensor values = batch_norm_channel_operand(coefficients, dtype_of<A>);
    launch_channel_map<T, A>(GradFromCoefficientsElement<T, A>{}, geometry, total,
                             static_cast<const A*>(values.raw_data()), static_cast<const T*>(input.raw_data()),
                             static_cast<const T*>(grad.raw_data()), static_cast<T*>(grad_input.raw_data()), device,
                             stream);
  });
}

}  // namespace mg::cuda
