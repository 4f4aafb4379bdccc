// memory/cpu_scratch_model.cpp — what the CPU kernels borrow beside their results, replayed
// on the simulated device when it stands in for the CPU (memory/simulated_target.h).
//
// Each entry below allocates what its CPU kernel allocates, in the same order, with the
// same sizes, dtypes and categories, and frees it where the kernel does (C++ scopes: a
// tensor dies at the end of its block, a temporary at the end of its full expression), so
// a prediction for the CPU matches a measured CPU run to the byte:
//   conv.cpp    operands not float32/float64 NCHW-dense are converted first, a result that
//               is not is computed into a temporary; then per-thread im2col column
//               buffers (and per-thread weight-gradient partials) as WORKSPACE
//               (core/cpu/conv_scratch.h gives their shapes, so the two cannot drift apart)
//   matmul.cpp  operands with no unit stride are made contiguous; 16-bit products run on
//               float32 copies into a float32 result
//   linear_gelu.cpp  forward: the same, through matmul.cpp's kernels
//   reduce.cpp  every reduction accumulates into an output-sized double/int64 tensor;
//               argmax works on a contiguous input and into a contiguous result
// Every other CPU kernel writes its result without borrowing memory.
// NOTE: the copies are made with the same factory calls the kernels use; on the simulated
// device those allocate the same blocks and their copy kernels do nothing.
#include <omp.h>

#include <string>
#include <vector>

#include "memgrad/core/cpu/conv_scratch.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/simulated_target.h"
#include "memgrad/core/tensor.h"

namespace mg {

namespace {

// conv.cpp's dispatch: runs `borrow(compute dtype)` between converting the operands and
// copying the result back.
template <class Borrow>
void conv_dispatch(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& result, Borrow&& borrow) {
  const DType compute = result.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  auto prepared = [compute](const Tensor& t) {
    const bool ready = !t.defined() || (t.dtype() == compute && t.is_contiguous());
    return ready ? t : converted_copy(t, compute, t.device());
  };
  const bool direct = result.dtype() == compute && result.is_contiguous();
  const Tensor computed = direct ? result : empty(result.sizes(), {.dtype = compute, .device = result.device()});
  {
    // NOTE: conv.cpp converts its three operands as the arguments of one call; GCC
    // evaluates those right to left. The order changes where blocks land (reserved
    // bytes), never how many bytes are allocated at once.
    const Tensor prepared_c = prepared(c);
    const Tensor prepared_b = prepared(b);
    const Tensor prepared_a = prepared(a);
    borrow(compute);
  }
}

Tensor workspace(const Shape& sizes, DType dtype, Device device) {
  return empty(sizes, {.dtype = dtype, .device = device, .category = MemoryCategory::Workspace});
}

void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
            const Tensor& output) {
  conv_dispatch(input, weight, bias, output, [&](DType compute) {
    const cpu::ConvScratchShapes scratch = cpu::conv_scratch_shapes(input.sizes(), weight.sizes(), output.sizes(), window);
    const Tensor buffers = workspace(scratch.column_buffers, compute, output.device());
  });
}

void conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                           const Tensor& grad_input, bool /*accumulate: the same temporaries*/) {
  conv_dispatch(grad_output, weight, Tensor(), grad_input, [&](DType compute) {
    const cpu::ConvScratchShapes scratch =
        cpu::conv_scratch_shapes(grad_input.sizes(), weight.sizes(), grad_output.sizes(), window);
    const Tensor buffers = workspace(scratch.column_buffers, compute, grad_input.device());
  });
}

void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight) {
  conv_dispatch(grad_output, input, Tensor(), grad_weight, [&](DType compute) {
    const cpu::ConvScratchShapes scratch =
        cpu::conv_scratch_shapes(input.sizes(), grad_weight.sizes(), grad_output.sizes(), window);
    const Tensor buffers = workspace(scratch.column_buffers, compute, grad_weight.device());
    const Tensor partials = workspace(scratch.weight_partials, compute, grad_weight.device());
  });
}

// matmul.cpp's in_compute_precision: 16-bit products on float32 copies.
void in_compute_precision(const Tensor& output, std::initializer_list<Tensor> operands) {
  if (!is_16_bit_float(output.dtype())) return;
  std::vector<Tensor> converted;
  for (const Tensor& operand : operands) converted.push_back(converted_copy(operand, DType::Float32, operand.device()));
  const Tensor result = empty(output.sizes(), {.device = output.device()});
}

// matmul.cpp: a batch of matrices with a unit stride in either dimension is used as it is.
bool has_unit_stride(const Tensor& matrix_batch) {
  const int64_t rows = matrix_batch.sizes()[1], cols = matrix_batch.sizes()[2];
  return matrix_batch.strides()[2] == 1 || matrix_batch.strides()[1] == 1 || rows == 1 || cols == 1;
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& output) {
  const Tensor lhs = has_unit_stride(a) ? a : contiguous_copy(a);
  const Tensor rhs = has_unit_stride(b) ? b : contiguous_copy(b);
  in_compute_precision(output, {lhs, rhs});
}

void linear_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output) {
  in_compute_precision(output, {input, weight, bias});
}

void reduce(ReduceOp op, const Tensor& input, const Tensor& output) {
  const DType accumulate = is_floating(input.dtype()) ? DType::Float64 : DType::Int64;
  const Tensor accumulated = empty(output.sizes(), {.dtype = accumulate, .device = output.device()});
}

void argmax(const Tensor& input, int dim, const Tensor& output) {
  const Tensor source = input.is_contiguous() ? input : contiguous_copy(input);
  const Tensor result = output.is_contiguous() ? output : empty_like(output);
}

// linear_gelu.cpp: linear_forward (or matmul without a bias) into pre_activation, then the
// gelu in place of a second pass. (The backward runs as its steps on every simulated device:
// core/simulated_kernels.cpp.)
Tensor as_batch_of_one(const Tensor& matrix, bool transpose = false) {
  const int64_t rows = matrix.sizes()[0], cols = matrix.sizes()[1];
  if (transpose) return make_view(matrix, {1, cols, rows}, {0, 1, cols}, matrix.storage_offset());
  return make_view(matrix, {1, rows, cols}, {0, cols, 1}, matrix.storage_offset());
}

void linear_gelu_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, bool /*tanh*/,
                         const Tensor& pre_activation, const Tensor& /*output*/) {
  if (bias.defined()) {
    linear_forward(input, weight, bias, pre_activation);
  } else {
    matmul(as_batch_of_one(input), as_batch_of_one(weight, /*transpose=*/true), as_batch_of_one(pre_activation));
  }
}

ScratchModel make_model() {
  KernelTable kernels = no_scratch_kernel_table();
  kernels.conv2d = conv2d;
  kernels.conv2d_backward_input = conv2d_backward_input;
  kernels.conv2d_backward_weight = conv2d_backward_weight;
  kernels.matmul = matmul;
  kernels.linear_forward = linear_forward;
  kernels.linear_gelu_forward = linear_gelu_forward;
  kernels.reduce = reduce;
  kernels.argmax = argmax;
  return {.kernels = kernels,
          .reset = nullptr,
          .describe = [] {
            return "the CPU kernels' scratch, replayed exactly (im2col column buffers for up to " +
                   std::to_string(omp_get_max_threads()) + " threads)";
          }};
}

}  // namespace

const ScratchModel& cpu_scratch_model() {
  static const ScratchModel model = make_model();
  return model;
}

}  // namespace mg
