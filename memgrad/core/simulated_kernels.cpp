// core/simulated_kernels.cpp — a kernel table whose every entry is a no-op, and the choice
// between it and the scratch kernels of the device being simulated.
#include "memgrad/core/simulated_kernels.h"

#include <atomic>

namespace mg {

namespace {

// Read by every simulated kernel call: one atomic load.
std::atomic<const KernelTable*> scratch_kernels{nullptr};

// A function with the given signature that ignores its arguments.
// (One that returns something returns its value-initialised value: false for a bool.)
template <class Signature> struct Ignore;
template <class Result, class... Args>
struct Ignore<Result (*)(Args...)> {
  static Result call(Args...) { return Result(); }
};
template <auto KernelTable::*Member>
constexpr auto ignore = Ignore<std::remove_reference_t<decltype(std::declval<KernelTable>().*Member)>>::call;

}  // namespace

KernelTable no_scratch_kernel_table() {
  return KernelTable{
      .copy = ignore<&KernelTable::copy>,
      .convert_each = ignore<&KernelTable::convert_each>,
      .fill = ignore<&KernelTable::fill>,
      .unary = ignore<&KernelTable::unary>,
      .binary = ignore<&KernelTable::binary>,
      .binary_scalar = ignore<&KernelTable::binary_scalar>,
      .reduce = ignore<&KernelTable::reduce>,
      .argmax = ignore<&KernelTable::argmax>,
      .matmul = ignore<&KernelTable::matmul>,
      .matmul_into = ignore<&KernelTable::matmul_into>,
      .linear_forward = ignore<&KernelTable::linear_forward>,
      .softmax = ignore<&KernelTable::softmax>,
      .softmax_backward = ignore<&KernelTable::softmax_backward>,
      .nll_forward = ignore<&KernelTable::nll_forward>,
      .nll_backward = ignore<&KernelTable::nll_backward>,
      .cross_entropy_forward = ignore<&KernelTable::cross_entropy_forward>,
      .cross_entropy_backward = ignore<&KernelTable::cross_entropy_backward>,
      .dropout = ignore<&KernelTable::dropout>,
      .masked_scale = ignore<&KernelTable::masked_scale>,
      .fill_uniform = ignore<&KernelTable::fill_uniform>,
      .fill_normal = ignore<&KernelTable::fill_normal>,
      .sgd_step = ignore<&KernelTable::sgd_step>,
      .adam_step = ignore<&KernelTable::adam_step>,
      .adagrad_step = ignore<&KernelTable::adagrad_step>,
      .non_finite_check_and_unscale = ignore<&KernelTable::non_finite_check_and_unscale>,
      .update_scale = ignore<&KernelTable::update_scale>,
      .total_norm_power = ignore<&KernelTable::total_norm_power>,
      .conv2d = ignore<&KernelTable::conv2d>,
      .conv2d_backward_input = ignore<&KernelTable::conv2d_backward_input>,
      .conv2d_backward_weight = ignore<&KernelTable::conv2d_backward_weight>,
      .conv2d_with_statistics = ignore<&KernelTable::conv2d_with_statistics>,
      .conv2d_backward_input_relu_batch_norm = ignore<&KernelTable::conv2d_backward_input_relu_batch_norm>,
      .max_pool2d = ignore<&KernelTable::max_pool2d>,
      .max_pool2d_backward = ignore<&KernelTable::max_pool2d_backward>,
      .avg_pool2d = ignore<&KernelTable::avg_pool2d>,
      .avg_pool2d_backward = ignore<&KernelTable::avg_pool2d_backward>,
      .batch_norm = ignore<&KernelTable::batch_norm>,
      .batch_norm_backward = ignore<&KernelTable::batch_norm_backward>,
      .batch_norm_backward_from_coefficients = ignore<&KernelTable::batch_norm_backward_from_coefficients>,
      .embedding = ignore<&KernelTable::embedding>,
      .embedding_backward = ignore<&KernelTable::embedding_backward>,
      .layer_norm = ignore<&KernelTable::layer_norm>,
      .layer_norm_backward = ignore<&KernelTable::layer_norm_backward>,
      .masked_fill = ignore<&KernelTable::masked_fill>,
      .topk = ignore<&KernelTable::topk>,
      .multinomial = ignore<&KernelTable::multinomial>,
      .gather = ignore<&KernelTable::gather>,
      .scatter_add = ignore<&KernelTable::scatter_add>,
      .attention_forward = ignore<&KernelTable::attention_forward>,
      .attention_backward = ignore<&KernelTable::attention_backward>,
  };
}

const KernelTable& simulated_kernel_table() {
  static const KernelTable no_scratch = no_scratch_kernel_table();
  const KernelTable* installed = scratch_kernels.load(std::memory_order_acquire);
  return installed != nullptr ? *installed : no_scratch;
}

void set_simulated_scratch_kernels(const KernelTable* kernels) {
  scratch_kernels.store(kernels, std::memory_order_release);
}

}  // namespace mg
