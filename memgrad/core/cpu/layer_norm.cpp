// core/cpu/layer_norm.cpp — CPU layer normalisation of each row of a (rows, cols) input,
// forward and backward.
//
// Rows are independent, so OpenMP splits them. With a residual, a row is first summed into
// `sum` (the input's dtype, so rounded as a separate add would round it), then normalised
// from there. A row's sums are carried in A: double for a
// float64 input, float otherwise (as the CUDA kernels do); the variance is the mean of
// squared deviations from the row's mean (two passes, no cancellation when |mean| >> std).
// weight and bias have the input's dtype, or float32 for a 16-bit input; the statistics are
// A. The backward's column sums (grad_weight, grad_bias) run over columns in blocks, each
// summing its rows in order, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

namespace {

template <class T>
using accumulate_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The cols values of a per-column tensor (weight, bias) in A; `fallback` everywhere when
// it is undefined (no weight means 1, no bias 0).
template <class A>
std::vector<A> read_columns(const Tensor& values, int64_t cols, A fallback) {
  std::vector<A> result(cols, fallback);
  if (!values.defined()) return result;
  dispatch_floating(values.dtype(), "layer_norm", [&]<class W>() {
    const W* data = values.data_ptr<W>();
    for (int64_t c = 0; c < cols; ++c) result[c] = static_cast<A>(static_cast<compute_t<W>>(data[c]));
  });
  return result;
}

template <class A>
void write_columns(const std::vector<A>& source, const Tensor& destination) {
  if (!destination.defined()) return;
  dispatch_floating(destination.dtype(), "layer_norm backward", [&]<class W>() {
    W* data = destination.data_ptr<W>();
    for (size_t c = 0; c < source.size(); ++c) data[c] = static_cast<W>(static_cast<compute_t<W>>(source[c]));
  });
}

// Columns per block of the backward's column sums: a block's running sums stay in L1.
constexpr int64_t kColumnBlock = 256;

}  // namespace

void layer_norm(const Tensor& input, const Tensor& residual, const Tensor& weight, const Tensor& bias, double eps,
                const Tensor& sum, const Tensor& output, const Tensor& save_mean, const Tensor& save_invstd) {
  const int64_t rows = input.sizes()[0], cols = input.sizes()[1];
  dispatch_floating(input.dtype(), "layer_norm", [&]<class T>() {
    using A = accumulate_t<T>;
    const std::vector<A> scale = read_columns<A>(weight, cols, A(1)), shift = read_columns<A>(bias, cols, A(0));
    // The rows normalised: the input's, or input + residual written to `sum` first.
    const T* in = input.data_ptr<T>();
    if (residual.defined()) {
      T* added = sum.data_ptr<T>();
      dispatch_floating(residual.dtype(), "layer_norm", [&]<class R>() {
        const R* res = residual.data_ptr<R>();
#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain)
        for (int64_t i = 0; i < rows * cols; ++i) {
          added[i] = static_cast<T>(static_cast<compute_t<T>>(in[i]) + static_cast<compute_t<T>>(static_cast<compute_t<R>>(res[i])));
        }
      });
      in = added;
    }
    T* out = output.data_ptr<T>();
    A* means = save_mean.data_ptr<A>();
    A* invstds = save_invstd.data_ptr<A>();
#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* x = in + r * cols;
      A total = 0;
      for (int64_t c = 0; c < cols; ++c) total += static_cast<A>(x[c]);
      const A mean = total / static_cast<A>(cols);
      A squares = 0;
      for (int64_t c = 0; c < cols; ++c) {
        A deviation = static_cast<A>(x[c]) - mean;
        squares += deviation * deviation;
      }
      const A invstd = A(1) / std::sqrt(squares / static_cast<A>(cols) + static_cast<A>(eps));
      means[r] = mean;
      invstds[r] = invstd;
      T* y = out + r * cols;
      for (int64_t c = 0; c < cols; ++c) y[c] = static_cast<T>((static_cast<A>(x[c]) - mean) * invstd * scale[c] + shift[c]);
    }
  });
}

void layer_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, const Tensor& grad_sum,
                         const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias) {
  const int64_t rows = input.sizes()[0], cols = input.sizes()[1];
  dispatch_floating(input.dtype(), "layer_norm backward", [&]<class T>() {
    using A = accumulate_t<T>;
    const std::vector<A> scale = read_columns<A>(weight, cols, A(1));
    const T* in = input.data_ptr<T>();
    const T* grad = grad_output.data_ptr<T>();
    const A* means = save_mean.data_ptr<A>();
    const A* invstds = save_invstd.data_ptr<A>();
    const bool parallel = input.numel() >= kParallelGrain;

    if (grad_input.defined()) {
      T* result = grad_input.data_ptr<T>();
      const T* added = grad_sum.defined() ? grad_sum.data_ptr<T>() : nullptr;
      // With xhat = (x - mean) * invstd and gw = g * w, the row's statistics depend on all
      // of its x: dx = invstd * (gw - mean(gw) - xhat * mean(gw * xhat)).
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t r = 0; r < rows; ++r) {
        const T* x = in + r * cols;
        const T* g = grad + r * cols;
        const A mean = means[r], invstd = invstds[r];
        A sum_scaled = 0, sum_scaled_xhat = 0;
        for (int64_t c = 0; c < cols; ++c) {
          A scaled = static_cast<A>(g[c]) * scale[c];
          sum_scaled += scaled;
          sum_scaled_xhat += scaled * (static_cast<A>(x[c]) - mean) * invstd;
        }
        const A mean_scaled = sum_scaled / static_cast<A>(cols), mean_scaled_xhat = sum_scaled_xhat / static_cast<A>(cols);
        T* dx = result + r * cols;
        for (int64_t c = 0; c < cols; ++c) {
          A xhat = (static_cast<A>(x[c]) - mean) * invstd;
          dx[c] = static_cast<T>(invstd * (static_cast<A>(g[c]) * scale[c] - mean_scaled - xhat * mean_scaled_xhat));
        }
        // The sum's gradient added to the rounded result, in a pass of its own: as the add of
        // layer_norm's gradient and the sum's would round it, bit for bit (within one
        // expression the compiler may contract the product and the add into an FMA).
        if (added == nullptr) continue;
        const T* dsum = added + r * cols;
        for (int64_t c = 0; c < cols; ++c) dx[c] = static_cast<T>(static_cast<A>(dx[c]) + static_cast<A>(dsum[c]));
      }
    }

    if (!grad_weight.defined() && !grad_bias.defined()) return;
    // grad_weight = sum over rows of g * xhat, grad_bias = sum over rows of g.
    std::vector<A> sum_grad_xhat(cols, A(0)), sum_grad(cols, A(0));
    const int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t begin = block * kColumnBlock, end = std::min(cols, begin + kColumnBlock);
      for (int64_t r = 0; r < rows; ++r) {
        const T* x = in + r * cols;
        const T* g = grad + r * cols;
        const A mean = means[r], invstd = invstds[r];
        for (int64_t c = begin; c < end; ++c) {
          A gradient = static_cast<A>(g[c]);
          sum_grad_xhat[c] += gradient * (static_cast<A>(x[c]) - mean) * invstd;
          sum_grad[c] += gradient;
        }
      }
    }
    write_columns(sum_grad_xhat, grad_weight);
    write_columns(sum_grad, grad_bias);
  });
}

}  // namespace mg::cpu
