// core/kernel_work.h — what one kernel call asks of a device: its arithmetic (floating-point
// operations of its matrix products) and the bytes of the tensors it reads and writes, from
// its arguments alone. The simulated device reports this for every call it makes (no
// arithmetic runs there), so a step run on it can be costed as well as measured
// (memory/step_cost.h).
//
// Bytes: the sum of every tensor argument's bytes (inputs and outputs once each), the
// traffic of a kernel that streams its operands once; a strided or broadcast view counts its
// elements. FLOPs: 2 per multiply-add of the products below; 0 for every other kernel, whose
// time is its bytes.
//   matmul, matmul_into     2 B M N K for a (B, M, K) @ (B, K, N)
//   linear_forward          2 rows out in
//   linear_gelu_forward     2 rows out in
//   linear_gelu_backward    2 rows in out (grad_pre = grad_output @ weight)
//   conv2d and its forms    2 x (elements of the output, or of the gradient of it) x
//                           (in channels / groups) x kernel height x kernel width
//   attention_forward       4 B H Tq Tk D (S = QK^T and O = PV), half of it causal
//   attention_backward      2.5 times the forward's (five products against two)
// Vector operations: arithmetic outside matrix products that bounds a kernel before its bytes
// do; counted only where it does, as operations per element:
//   adam_8bit_step          kAdam8bitOperations per parameter element (two dynamic-map
//                           lookups by binary search to requantise, the dequantisation and
//                           the update), fitted to the H100's measured step
#pragma once

#include <span>
#include <type_traits>

#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"

namespace mg {

struct KernelWork {
  const char* kernel = "";  // the kernel list's name of the entry
  double flops = 0;
  double operations = 0;  // vector arithmetic that may bound the kernel (see above)
  double bytes = 0;
  DType dtype = DType::Float32;  // of the first tensor argument: which rate its FLOPs run at
  bool between_devices = false;  // its tensors lie on different devices (a copy to or from the host)
  // Its first tensor is 4-D and not channels_last: a convolution in NCHW, which cuDNN runs
  // slower than in NHWC (transposing, or with slower kernels).
  bool channels_first = false;
};

namespace kernel_work {

inline double bytes_of(const Tensor& tensor) {
  return tensor.defined() ? static_cast<double>(tensor.numel()) * static_cast<double>(tensor.element_size()) : 0.0;
}
inline double bytes_of(std::span<const Tensor> tensors) {
  double bytes = 0;
  for (const Tensor& tensor : tensors) bytes += bytes_of(tensor);
  return bytes;
}
template <class Other>
double bytes_of(const Other&) {
  return 0.0;
}

// Whether `tensor` is defined and lies elsewhere than `first`.
inline bool elsewhere(const Tensor* first, const Tensor& tensor) {
  return first != nullptr && tensor.defined() && first->defined() && tensor.device() != first->device();
}
template <class Other>
bool elsewhere(const Tensor*, const Other&) {
  return false;
}

inline const Tensor* first_tensor() { return nullptr; }
template <class First, class... Rest>
const Tensor* first_tensor(const First& first, const Rest&... rest) {
  if constexpr (std::is_same_v<First, Tensor>) {
    return &first;
  } else {
    return first_tensor(rest...);
  }
}

// 2 x elements x (in channels / groups) x kernel area: a convolution whose output (or the
// gradient of it) is `per_output` and whose weight is `weight` (out, in / groups, kh, kw).
inline double convolution_flops(const Tensor& per_output, const Tensor& weight) {
  return 2.0 * static_cast<double>(per_output.numel()) * static_cast<double>(weight.numel() / weight.size(0));
}

inline double attention_flops(const Tensor& q, const Tensor& k, const AttentionParams& params) {
  const double full = 4.0 * static_cast<double>(q.numel()) * static_cast<double>(k.size(-2));
  return params.is_causal ? full / 2.0 : full;
}

// The vector operations of one call of the entry `Member`: 0 unless specialised below.
inline constexpr double kAdam8bitOperations = 64;
template <auto Member>
struct Operations {
  template <class... Args>
  static double of(const Args&...) {
    return 0.0;
  }
};
template <>
struct Operations<&KernelTable::adam_8bit_step> {
  template <class... Rest>
  static double of(std::span<const Tensor> params, const Rest&...) {
    double elements = 0;
    for (const Tensor& param : params) elements += static_cast<double>(param.numel());
    return kAdam8bitOperations * elements;
  }
};

// The FLOPs of one call of the entry `Member`: 0 unless specialised below.
template <auto Member>
struct Flops {
  template <class... Args>
  static double of(const Args&...) {
    return 0.0;
  }
};
template <>
struct Flops<&KernelTable::matmul> {
  static double of(const Tensor& a, const Tensor&, const Tensor& output) {
    return 2.0 * static_cast<double>(output.numel()) * static_cast<double>(a.size(-1));
  }
};
template <>
struct Flops<&KernelTable::matmul_into> {
  static double of(const Tensor& a, const Tensor&, const Tensor& output, bool) {
    return 2.0 * static_cast<double>(output.numel()) * static_cast<double>(a.size(-1));
  }
};
template <>
struct Flops<&KernelTable::linear_forward> {
  static double of(const Tensor& input, const Tensor&, const Tensor&, const Tensor& output) {
    return 2.0 * static_cast<double>(output.numel()) * static_cast<double>(input.size(-1));
  }
};
template <>
struct Flops<&KernelTable::linear_gelu_forward> {
  static double of(const Tensor& input, const Tensor&, const Tensor&, bool, const Tensor&, const Tensor& output) {
    return 2.0 * static_cast<double>(output.numel()) * static_cast<double>(input.size(-1));
  }
};
template <>
struct Flops<&KernelTable::linear_gelu_backward> {
  static double of(const Tensor& grad_output, const Tensor&, const Tensor&, bool, const Tensor& grad_pre,
                   const Tensor&) {
    return 2.0 * static_cast<double>(grad_pre.numel()) * static_cast<double>(grad_output.size(-1));
  }
};
template <>
struct Flops<&KernelTable::conv2d> {
  static double of(const Tensor&, const Tensor& weight, const Tensor&, const Window2d&, const Tensor& output) {
    return convolution_flops(output, weight);
  }
};
template <>
struct Flops<&KernelTable::conv2d_backward_input> {
  static double of(const Tensor& grad_output, const Tensor& weight, const Window2d&, const Tensor&, bool) {
    return convolution_flops(grad_output, weight);
  }
};
template <>
struct Flops<&KernelTable::conv2d_backward_weight> {
  static double of(const Tensor& grad_output, const Tensor&, const Window2d&, const Tensor& grad_weight) {
    return convolution_flops(grad_output, grad_weight);
  }
};
template <>
struct Flops<&KernelTable::conv2d_with_statistics> {
  static double of(const Tensor&, const Tensor& weight, const Window2d&, const Tensor& output, const Tensor&,
                   const Tensor&) {
    return convolution_flops(output, weight);
  }
};
template <>
struct Flops<&KernelTable::conv2d_backward_input_relu_batch_norm> {
  template <class... Rest>
  static double of(const Tensor& grad_output, const Tensor& weight, const Rest&...) {
    return convolution_flops(grad_output, weight);
  }
};
template <>
struct Flops<&KernelTable::attention_forward> {
  static double of(const Tensor& q, const Tensor& k, const Tensor&, const AttentionParams& params, const Tensor&,
                   const Tensor&) {
    return attention_flops(q, k, params);
  }
};
template <>
struct Flops<&KernelTable::attention_backward> {
  template <class... Rest>
  static double of(const Tensor&, const Tensor& q, const Tensor& k, const Tensor&, const Tensor&, const Tensor&,
                   const AttentionParams& params, const Rest&...) {
    return 2.5 * attention_flops(q, k, params);
  }
};

}  // namespace kernel_work

// The work of a call of the entry `Member` with `args`.
template <auto Member, class... Args>
KernelWork work_of(const char* kernel, const Args&... args) {
  const Tensor* first = kernel_work::first_tensor(args...);
  return {.kernel = kernel,
          .flops = kernel_work::Flops<Member>::of(args...),
          .operations = kernel_work::Operations<Member>::of(args...),
          .bytes = (0.0 + ... + kernel_work::bytes_of(args)),
          .dtype = first != nullptr && first->defined() ? first->dtype() : DType::Float32,
          .between_devices = (false || ... || kernel_work::elsewhere(first, args)),
          .channels_first = first != nullptr && first->defined() && first->dim() == 4 &&
                            suggest_memory_format(*first) != MemoryFormat::ChannelsLast};
}

}  // namespace mg
