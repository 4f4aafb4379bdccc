// core/cpu/batch_norm.cpp — CPU batch normalisation, forward (training and evaluation) and
// the training-mode backward, over (N, C) inputs and (N, C, H, W) inputs dense in NCHW
// or channels-last order, optionally followed by a fused residual add and/or ReLU; outputs
// and gradients share the input's layout.
//
// The input is seen as (N, C, inner) with inner = H * W (1 for (N, C)): element (n, c, i)
// sits at (n * C + c) * inner + i in NCHW order and at (n * inner + i) * C + c in
// channels-last order. Channels are independent, so OpenMP splits them. Per-channel
// tensors (weight, bias, statistics) may have a dtype other than the input's (float32
// statistics for 16-bit inputs), so they are read into and written from double vectors; a
// channel's sums are always carried in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

namespace {

struct ChannelLayout {
  int64_t batch = 0, channels = 0, inner = 1;
  bool channels_last = false;
  int64_t per_channel() const { return batch * inner; }
  // Offset of element (n, c, i).
  int64_t at(int64_t n, int64_t c, int64_t i) const {
    return channels_last ? (n * inner + i) * channels + c : (n * channels + c) * inner + i;
  }
};

ChannelLayout layout_of(const Tensor& input) {
  ChannelLayout layout;
  layout.batch = input.sizes()[0];
  layout.channels = input.sizes()[1];
  for (int d = 2; d < input.dim(); ++d) layout.inner *= input.sizes()[d];
  layout.channels_last = !input.is_contiguous();  // the caller passes only the two dense layouts
  return layout;
}

// The C values of a per-channel tensor as double; `fallback` everywhere when it is
// undefined (no weight means 1, no bias means 0).
std::vector<double> read_channels(const Tensor& values, int64_t channels, double fallback) {
  std::vector<double> result(channels, fallback);
  if (!values.defined()) return result;
  dispatch_floating(values.dtype(), "batch_norm", [&]<class T>() {
    const T* data = values.data_ptr<T>();
    for (int64_t c = 0; c < channels; ++c) result[c] = static_cast<double>(static_cast<compute_t<T>>(data[c]));
  });
  return result;
}

void write_channels(const std::vector<double>& source, const Tensor& destination) {
  if (!destination.defined()) return;
  dispatch_floating(destination.dtype(), "batch_norm", [&]<class T>() {
    T* data = destination.data_ptr<T>();
    for (size_t c = 0; c < source.size(); ++c) data[c] = static_cast<T>(static_cast<compute_t<T>>(source[c]));
  });
}

// One channel's y = x * scale + shift: (x - mean) * invstd * w + b folded into one
// multiply-add. The fused ReLU's forward and backward both build it with this, from the
// same doubles, so the backward's mask (y > 0) is the forward's (without a residual; with
// one, the backward reads the mask from the output).
struct ChannelAffine {
  double scale, shift;
  ChannelAffine(double mean, double invstd, double weight, double bias)
      : scale(invstd * weight), shift(bias - mean * scale) {}
  double operator()(double x) const { return x * scale + shift; }
};

}  // namespace

void batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, const Tensor& num_batches_tracked, bool training, double momentum,
                double eps, bool relu, const Tensor& residual, const ChannelSums& statistics, const Tensor& output,
                const Tensor& save_mean, const Tensor& save_invstd) {
  ChannelLayout layout = layout_of(input);
  const int64_t channels = layout.channels, count = layout.per_channel();
  std::vector<double> scale = read_channels(weight, channels, 1.0);
  std::vector<double> shift = read_channels(bias, channels, 0.0);
  std::vector<double> mean(channels), invstd(channels);

  dispatch_floating(input.dtype(), "batch_norm", [&]<class T>() {
    const T* in = input.data_ptr<T>();
    const T* added = residual.defined() ? residual.data_ptr<T>() : nullptr;
    T* out = output.data_ptr<T>();

    if (training) {
      std::vector<double> unbiased_var(channels);
      // Given sums: squares = sum(x^2) - n mean^2, clamped at 0 (kernels.h).
      const std::vector<double> given_sum = read_channels(statistics.sum, channels, 0.0);
      const std::vector<double> given_squares = read_channels(statistics.square_sum, channels, 0.0);
#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain)
      for (int64_t c = 0; c < channels; ++c) {
        double channel_mean = 0, squares = 0;
        if (statistics.defined()) {
          channel_mean = count > 0 ? given_sum[c] / count : 0.0;
          squares = std::max(given_squares[c] - count * channel_mean * channel_mean, 0.0);
        } else {
          // Two passes (mean, then squared deviations): no cancellation when |mean| >> std.
          double total = 0;
          for (int64_t n = 0; n < layout.batch; ++n)
            for (int64_t i = 0; i < layout.inner; ++i) total += static_cast<double>(static_cast<compute_t<T>>(in[layout.at(n, c, i)]));
          channel_mean = count > 0 ? total / count : 0.0;
          for (int64_t n = 0; n < layout.batch; ++n) {
            for (int64_t i = 0; i < layout.inner; ++i) {
              double deviation = static_cast<double>(static_cast<compute_t<T>>(in[layout.at(n, c, i)])) - channel_mean;
              squares += deviation * deviation;
            }
          }
        }
        double biased_var = count > 0 ? squares / count : 0.0;
        mean[c] = channel_mean;
        invstd[c] = 1.0 / std::sqrt(biased_var + eps);
        // The running variance estimates the population's, hence n / (n - 1) as in PyTorch.
        unbiased_var[c] = count > 1 ? squares / (count - 1) : biased_var;
      }
      write_channels(mean, save_mean);
      write_channels(invstd, save_invstd);
      if (relu && !residual.defined()) {  // normalise with the statistics as the backward will read them
        mean = read_channels(save_mean, channels, 0.0);
        invstd = read_channels(save_invstd, channels, 1.0);
      }
      if (running_mean.defined()) {
        std::vector<double> running = read_channels(running_mean, channels, 0.0);
        for (int64_t c = 0; c < channels; ++c) running[c] = (1 - momentum) * running[c] + momentum * mean[c];
        write_channels(running, running_mean);
      }
      if (running_var.defined()) {
        std::vector<double> running = read_channels(running_var, channels, 1.0);
        for (int64_t c = 0; c < channels; ++c) running[c] = (1 - momentum) * running[c] + momentum * unbiased_var[c];
        write_channels(running, running_var);
      }
      if (num_batches_tracked.defined()) *num_batches_tracked.data_ptr<int64_t>() += 1;
    } else {
      mean = read_channels(running_mean, channels, 0.0);
      std::vector<double> var = read_channels(running_var, channels, 1.0);
      for (int64_t c = 0; c < channels; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    }

#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain)
    for (int64_t c = 0; c < channels; ++c) {
      const ChannelAffine affine(mean[c], invstd[c], scale[c], shift[c]);
      for (int64_t n = 0; n < layout.batch; ++n) {
        for (int64_t i = 0; i < layout.inner; ++i) {
          int64_t index = layout.at(n, c, i);
          double y = affine(static_cast<double>(static_cast<compute_t<T>>(in[index])));
          if (added != nullptr) y += static_cast<double>(static_cast<compute_t<T>>(added[index]));
          // NaN stays NaN, as PyTorch's relu.
          if (relu && y < 0) y = 0;
          out[index] = static_cast<T>(static_cast<compute_t<T>>(y));
        }
      }
    }
  });
}

void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Tensor& save_mean, const Tensor& save_invstd, bool relu, const Tensor& output,
                         const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_residual) {
  ChannelLayout layout = layout_of(input);
  const int64_t channels = layout.channels, count = layout.per_channel();
  std::vector<double> scale = read_channels(weight, channels, 1.0);
  std::vector<double> shift = read_channels(bias, channels, 0.0);
  std::vector<double> mean = read_channels(save_mean, channels, 0.0);
  std::vector<double> invstd = read_channels(save_invstd, channels, 1.0);
  std::vector<double> sum_grad(channels), sum_grad_xhat(channels);

  dispatch_floating(input.dtype(), "batch_norm backward", [&]<class T>() {
    const T* in = input.data_ptr<T>();
    const T* grad = grad_output.data_ptr<T>();
    const T* out = output.defined() ? output.data_ptr<T>() : nullptr;
    T* result = grad_input.defined() ? grad_input.data_ptr<T>() : nullptr;
    T* through = grad_residual.defined() ? grad_residual.data_ptr<T>() : nullptr;
    auto value = [](T x) { return static_cast<double>(static_cast<compute_t<T>>(x)); };
    // NOTE: a copy local to this lambda: clang 14 rejects a lambda in the parallel loop
    // that names the enclosing function's parameter ("reference to local variable").
    const bool masked = relu;

#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain)
    for (int64_t c = 0; c < channels; ++c) {
      const ChannelAffine affine(mean[c], invstd[c], scale[c], shift[c]);
      // The gradient reaching the normalisation: through the ReLU's mask when fused, read
      // from the output when there was a residual, else rebuilt from the input.
      auto grad_at = [&](int64_t index) {
        if (!masked) return value(grad[index]);
        bool positive = out != nullptr ? value(out[index]) > 0 : affine(value(in[index])) > 0;
        return positive ? value(grad[index]) : 0.0;
      };
      double total = 0, dot = 0;
      for (int64_t n = 0; n < layout.batch; ++n) {
        for (int64_t i = 0; i < layout.inner; ++i) {
          int64_t index = layout.at(n, c, i);
          double g = grad_at(index);
          if (through != nullptr) through[index] = static_cast<T>(static_cast<compute_t<T>>(g));
          total += g;
          dot += g * (value(in[index]) - mean[c]) * invstd[c];
        }
      }
      sum_grad[c] = total;
      sum_grad_xhat[c] = dot;
      if (result == nullptr || count == 0) continue;
      // dx = w * invstd / n * (n * g - sum(g) - xhat * sum(g * xhat)): the batch
      // statistics depend on every x of the channel, hence the two correction terms.
      double factor = scale[c] * invstd[c] / count;
      for (int64_t n = 0; n < layout.batch; ++n) {
        for (int64_t i = 0; i < layout.inner; ++i) {
          int64_t index = layout.at(n, c, i);
          double xhat = (value(in[index]) - mean[c]) * invstd[c];
          double dx = factor * (count * grad_at(index) - total - xhat * dot);
          result[index] = static_cast<T>(static_cast<compute_t<T>>(dx));
        }
      }
    }
  });
  write_channels(sum_grad_xhat, grad_weight);
  write_channels(sum_grad, grad_bias);
}

void batch_norm_backward_from_coefficients(const Tensor& grad, const Tensor& input, const Tensor& coefficients,
                                           const Tensor& grad_input) {
  ChannelLayout layout = layout_of(input);
  const int64_t channels = layout.channels;
  std::vector<double> grad_scale = read_channels(coefficients.select(0, 0), channels, 0.0);
  std::vector<double> input_scale = read_channels(coefficients.select(0, 1), channels, 0.0);
  std::vector<double> offset = read_channels(coefficients.select(0, 2), channels, 0.0);
  dispatch_floating(input.dtype(), "batch_norm backward from coefficients", [&]<class T>() {
    const T* in = input.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    T* result = grad_input.data_ptr<T>();
    auto value = [](T x) { return static_cast<double>(static_cast<compute_t<T>>(x)); };
#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain)
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t n = 0; n < layout.batch; ++n) {
        for (int64_t i = 0; i < layout.inner; ++i) {
          int64_t index = layout.at(n, c, i);
          double dx = grad_scale[c] * value(g[index]) + input_scale[c] * value(in[index]) + offset[c];
          result[index] = static_cast<T>(static_cast<compute_t<T>>(dx));
        }
      }
    }
  });
}

}  // namespace mg::cpu
