// core/cpu/softmax_loss.cpp — CPU softmax / log_softmax (forward and backward), the
// negative log-likelihood gather/scatter, and cross entropy fused from logits.
//
// A contiguous tensor seen along `dim` is (outer, extent, inner): element (o, k, i) sits at
// (o * extent + k) * inner + i. Each (o, i) line is independent.
//
// Cross entropy computes each row as softmax does (the maximum, shift 0 when it is
// infinite, the sum of exponentials) and its loss from the shifted logits, so that without
// label smoothing it is, bit for bit, nll_loss of log_softmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

void softmax(const Tensor& input, int dim, bool log, const Tensor& output) {
  LinesAlong lines = lines_along(input.sizes(), dim);
  dispatch_floating(input.dtype(), "softmax", [&]<class T>() {
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* in = input.data_ptr<T>();
    T* out = output.data_ptr<T>();
#pragma omp parallel for collapse(2) schedule(static) if (input.numel() >= kParallelGrain)
    for (int64_t o = 0; o < lines.outer; ++o) {
      for (int64_t i = 0; i < lines.inner; ++i) {
        int64_t base = o * lines.extent * lines.inner + i;
        C max_value = -std::numeric_limits<C>::infinity();
        for (int64_t k = 0; k < lines.extent; ++k) max_value = std::max(max_value, static_cast<C>(in[base + k * lines.inner]));
        // An all -inf line gives NaN as in PyTorch; guard the shift only against that.
        C shift = std::isinf(max_value) ? C(0) : max_value;
        C total = 0;
        for (int64_t k = 0; k < lines.extent; ++k) total += std::exp(static_cast<C>(in[base + k * lines.inner]) - shift);
        C log_total = std::log(total);
        for (int64_t k = 0; k < lines.extent; ++k) {
          C shifted = static_cast<C>(in[base + k * lines.inner]) - shift;
          out[base + k * lines.inner] = static_cast<T>(log ? shifted - log_total : std::exp(shifted) / total);
        }
      }
    }
  });
}

void softmax_backward(const Tensor& grad_output, const Tensor& output, int dim, bool log,
                      const Tensor& grad_input) {
  LinesAlong lines = lines_along(output.sizes(), dim);
  dispatch_floating(output.dtype(), "softmax backward", [&]<class T>() {
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* grad = grad_output.data_ptr<T>();
    const T* out = output.data_ptr<T>();
    T* result = grad_input.data_ptr<T>();
#pragma omp parallel for collapse(2) schedule(static) if (output.numel() >= kParallelGrain)
    for (int64_t o = 0; o < lines.outer; ++o) {
      for (int64_t i = 0; i < lines.inner; ++i) {
        int64_t base = o * lines.extent * lines.inner + i;
        // softmax: dx = y * (g - sum(g * y));  log_softmax: dx = g - exp(y) * sum(g)
        C dot = 0;
        for (int64_t k = 0; k < lines.extent; ++k) {
          int64_t at = base + k * lines.inner;
          dot += log ? static_cast<C>(grad[at]) : static_cast<C>(grad[at]) * static_cast<C>(out[at]);
        }
        for (int64_t k = 0; k < lines.extent; ++k) {
          int64_t at = base + k * lines.inner;
          C g = static_cast<C>(grad[at]), y = static_cast<C>(out[at]);
          result[at] = static_cast<T>(log ? g - std::exp(y) * dot : y * (g - dot));
        }
      }
    }
  });
}

namespace {

// What a row's arithmetic is carried out in (and a cross entropy's log_sum_exp stored in).
template <class T>
using line_compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

void check_targets(const char* op, const int64_t* labels, int64_t batch, int64_t classes, int64_t ignore_index) {
  for (int64_t n = 0; n < batch; ++n) {
    MG_CHECK(labels[n] == ignore_index || (labels[n] >= 0 && labels[n] < classes), op, ": target ", labels[n],
             " at position ", n, " is out of range for ", classes, " classes (expected 0..", classes - 1,
             ", or ignore_index ", ignore_index, ")");
  }
}

}  // namespace

void nll_forward(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, const Tensor& loss) {
  int64_t batch = log_probs.sizes()[0], classes = log_probs.sizes()[1];
  const int64_t* labels = target.data_ptr<int64_t>();
  check_targets("nll_loss", labels, batch, classes, ignore_index);
  dispatch_floating(log_probs.dtype(), "nll_loss", [&]<class T>() {
    const T* log_p = log_probs.data_ptr<T>();
    T* out = loss.data_ptr<T>();
    for (int64_t n = 0; n < batch; ++n) {
      out[n] = labels[n] == ignore_index ? T(0) : static_cast<T>(-static_cast<compute_t<T>>(log_p[n * classes + labels[n]]));
    }
  });
}

void nll_backward(const Tensor& grad_loss, const Tensor& target, int64_t ignore_index, const Tensor& grad_input) {
  int64_t batch = grad_input.sizes()[0], classes = grad_input.sizes()[1];
  const int64_t* labels = target.data_ptr<int64_t>();
  fill(grad_input, 0.0);
  dispatch_floating(grad_input.dtype(), "nll_loss backward", [&]<class T>() {
    const T* grad = grad_loss.data_ptr<T>();
    T* result = grad_input.data_ptr<T>();
    for (int64_t n = 0; n < batch; ++n) {
      if (labels[n] != ignore_index) result[n * classes + labels[n]] = static_cast<T>(-static_cast<compute_t<T>>(grad[n]));
    }
  });
}

// Calls fn.template operator()<L>() with L the type of cross entropy's loss (and its
// gradient): the logits' own T, or C (float32) where the caller asked for float32 losses
// of 16-bit logits (autocast).
template <class T, class C, class Fn>
void with_loss_type(DType loss_dtype, Fn&& fn) {
  if (loss_dtype == dtype_of<T>) fn.template operator()<T>();
  else fn.template operator()<C>();
}

void cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index, double label_smoothing,
                           const Tensor& loss, const Tensor& log_sum_exp) {
  int64_t batch = logits.sizes()[0], classes = logits.sizes()[1];
  const int64_t* labels = target.data_ptr<int64_t>();
  check_targets("cross_entropy", labels, batch, classes, ignore_index);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    using C = line_compute_t<T>;
    with_loss_type<T, C>(loss.dtype(), [&]<class L>() {
      const T* in = logits.data_ptr<T>();
      L* out = loss.data_ptr<L>();
      C* lse = log_sum_exp.data_ptr<C>();
      const C smoothing = static_cast<C>(label_smoothing), kept = 1 - smoothing;
#pragma omp parallel for schedule(static) if (logits.numel() >= kParallelGrain)
      for (int64_t n = 0; n < batch; ++n) {
        const T* row = in + n * classes;
        C max_value = -std::numeric_limits<C>::infinity();
        for (int64_t c = 0; c < classes; ++c) max_value = std::max(max_value, static_cast<C>(row[c]));
        C shift = std::isinf(max_value) ? C(0) : max_value;
        C total = 0, shifted_sum = 0;
        for (int64_t c = 0; c < classes; ++c) {
          C shifted = static_cast<C>(row[c]) - shift;
          total += std::exp(shifted);
          shifted_sum += shifted;
        }
        C log_total = std::log(total);
        lse[n] = shift + log_total;
        if (labels[n] == ignore_index) {
          out[n] = L(0);
          continue;
        }
        // -(1 - s) log_p[target] - s mean_c log_p[c], with log_p = shifted - log_total.
        C target_term = log_total - (static_cast<C>(row[labels[n]]) - shift);
        C value = smoothing == 0 ? target_term : kept * target_term + smoothing * (log_total - shifted_sum / classes);
        out[n] = static_cast<L>(value);
      }
    });
  });
}

void cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& log_sum_exp,
                            const Tensor& target, int64_t ignore_index, double label_smoothing,
                            const Tensor& grad_logits) {
  int64_t batch = logits.sizes()[0], classes = logits.sizes()[1];
  const int64_t* labels = target.data_ptr<int64_t>();
  dispatch_floating(logits.dtype(), "cross_entropy backward", [&]<class T>() {
    using C = line_compute_t<T>;
    with_loss_type<T, C>(grad_loss.dtype(), [&]<class L>() {
      const L* grad = grad_loss.data_ptr<L>();
      const T* in = logits.data_ptr<T>();
      const C* lse = log_sum_exp.data_ptr<C>();
      T* result = grad_logits.data_ptr<T>();
      const C smoothing = static_cast<C>(label_smoothing), kept = 1 - smoothing, uniform = smoothing / classes;
#pragma omp parallel for schedule(static) if (logits.numel() >= kParallelGrain)
      for (int64_t n = 0; n < batch; ++n) {
        T* row_result = result + n * classes;
        int64_t label = labels[n];
        if (label == ignore_index) {
          std::fill(row_result, row_result + classes, T(0));
          continue;
        }
        C g = static_cast<C>(grad[n]);
        for (int64_t c = 0; c < classes; ++c) {
          C probability = std::exp(static_cast<C>(in[n * classes + c]) - lse[n]);
          C target_weight = (c == label ? kept : C(0)) + uniform;
          row_result[c] = static_cast<T>(g * (probability - target_weight));
        }
      }
    });
  });
}

}  // namespace mg::cpu
