// autograd/linear_cross_entropy.cpp — see the header. Forward, per chunk of rows r:
//
//   logits_r = hidden_r @ weight^T                        (rows, V), the product's dtype
//   loss_r, lse_r = cross_entropy kernel (logits_r)
//   logits_r <- softmax(logits_r) - smoothed one-hot      in place: d loss_r / d logits_r
//   grad_hidden_r  = logits_r @ weight                    float32, (rows, C)
//   grad_weight   += logits_r^T @ hidden_r                float32, (V, C), summed over chunks
//
// and the node keeps grad_hidden and grad_weight. Backward: each times the incoming scalar
// (over the count of counted targets for the mean), rounded to the dtype of the tensor the
// caller passed (under autocast its float32 tensor, not the 16-bit copy the products used).
#include "memgrad/autograd/linear_cross_entropy.h"

#include <algorithm>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/loss_reduction.h"
#include "memgrad/autograd/matrix_views.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/memory/context.h"

namespace mg {

namespace {

constexpr const char* kOp = "linear_cross_entropy";

void check_arguments(const Tensor& hidden, const Tensor& weight, const Tensor& target, int64_t chunk_bytes) {
  for (const Tensor* x : {&hidden, &weight, &target}) autograd::check_defined(kOp, *x);
  autograd::check_floating(kOp, hidden);
  autograd::check_same_device(kOp, hidden, weight);
  MG_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.sizes()[1] == weight.sizes()[1], kOp,
           ": expected hidden (N, C) and weight (V, C), got hidden ", hidden.sizes(), " and weight ", weight.sizes(),
           ". Hint: flatten the hidden states with .view({-1, C}).");
  MG_CHECK(hidden.dtype() == weight.dtype(), kOp, ": hidden is ", hidden.dtype(), " but weight is ", weight.dtype(),
           ". Hint: convert one with .to(", weight.dtype(), "), or run under autocast.");
  MG_CHECK(chunk_bytes > 0, kOp, ": chunk_bytes must be positive, got ", chunk_bytes);
  autograd::check_same_device(kOp, hidden, target);
  MG_CHECK(target.dtype() == DType::Int64, kOp, ": target must hold int64 class indices, got ", target.dtype(),
           "; hint: labels.to(mg::DType::Int64)");
  MG_CHECK(target.dim() == 1 && target.sizes()[0] == hidden.sizes()[0], kOp, ": target of shape ", target.sizes(),
           " does not match hidden of shape ", hidden.sizes(), "; expected target of shape [", hidden.sizes()[0],
           "] (one class index per row)");
}

// A (rows, cols) slice of a contiguous matrix, starting at row `first`, as the (1, rows,
// cols) batch the kernels take.
Tensor rows_of(const Tensor& matrix, int64_t first, int64_t rows) {
  int64_t cols = matrix.sizes()[1];
  return make_view(matrix, {1, rows, cols}, {rows * cols, cols, 1}, matrix.storage_offset() + first * cols);
}

// `sum` times the (1) factor, in `dtype`.
Tensor scaled(const Tensor& sum, const Tensor& factor, DType dtype) {
  if (!sum.defined()) return Tensor();
  const KernelTable& kernel = kernels(sum.device());
  Tensor product = autograd::new_output(sum.sizes(), sum.dtype(), sum);
  kernel.binary(BinaryOp::Mul, sum, make_view(factor, sum.sizes(), {0, 0}, factor.storage_offset()), product);
  if (dtype == product.dtype()) return product;
  Tensor rounded = autograd::new_output(sum.sizes(), dtype, sum);
  kernel.copy(product, rounded);
  return rounded;
}

}  // namespace

Tensor linear_cross_entropy(const Tensor& hidden_in, const Tensor& weight_in, const Tensor& target,
                            const CrossEntropyOptions& options, int64_t chunk_bytes) {
  check_arguments(hidden_in, weight_in, target, chunk_bytes);
  if (options.reduction == Reduction::None) return cross_entropy(linear(hidden_in, weight_in), target, options);
  MG_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0, kOp,
           ": label_smoothing must be in [0, 1], got ", options.label_smoothing);
  memory::OpScope scope(kOp);
  // Autocast: the product's operands in the autocast dtype (the weight's copy cached), the
  // loss in float32, as linear and cross_entropy do.
  const Tensor hidden = amp::cast_to_autocast_dtype(hidden_in), weight = amp::cast_to_autocast_dtype(weight_in);
  const DType dtype = hidden.dtype();
  const bool sixteen_bit = is_16_bit_float(dtype);
  const DType loss_dtype = sixteen_bit && amp::is_autocast_on_for(hidden_in) ? DType::Float32 : dtype;
  const DType sum_dtype = dtype == DType::Float64 ? DType::Float64 : DType::Float32;

  const KernelTable& kernel = kernels(hidden.device());
  const Tensor x = autograd::contiguous_or_copy(hidden), w = autograd::contiguous_or_copy(weight),
               labels = autograd::contiguous_or_copy(target);
  const int64_t batch = x.sizes()[0], features = x.sizes()[1], classes = w.sizes()[0];
  const bool grad_hidden = autograd::needs_grad(hidden_in), grad_weight = autograd::needs_grad(weight_in);

  Tensor losses = autograd::new_output({batch}, loss_dtype, x);
  Tensor log_sum_exp = autograd::new_output({batch}, sum_dtype, x);
  Tensor hidden_grad_sum = grad_hidden ? autograd::new_output({batch, features}, sum_dtype, x) : Tensor();
  Tensor weight_grad_sum = grad_weight ? autograd::new_output({classes, features}, sum_dtype, x) : Tensor();
  if (grad_weight && batch == 0) kernel.fill(weight_grad_sum, 0.0);

  // Equal chunks of at most chunk_bytes of logits (at least one row each).
  const int64_t row_bytes = std::max<int64_t>(classes * element_size(dtype), 1);
  const int64_t chunks = std::max<int64_t>(1, (batch * row_bytes + chunk_bytes - 1) / chunk_bytes);
  const int64_t chunk_rows = std::max<int64_t>(1, (batch + chunks - 1) / chunks);
  Tensor logits_buffer = autograd::new_output({std::min(chunk_rows, batch) * classes}, dtype, x);
  // The per-row gradient the forward-time backward is taken with: 1 (the scalar comes later).
  Tensor unit_grads = autograd::new_output({std::min(chunk_rows, batch)}, loss_dtype, x);
  if (grad_hidden || grad_weight) kernel.fill(unit_grads, 1.0);
  const Tensor weight_transposed = make_view(w, {1, features, classes}, {0, 1, features}, w.storage_offset());
  const Tensor weight_batch = make_view(w, {1, classes, features}, {0, features, 1}, w.storage_offset());

  for (int64_t first = 0; first < batch; first += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, batch - first);
    const Tensor logits = make_view(logits_buffer, {rows, classes}, {classes, 1}, logits_buffer.storage_offset());
    const Tensor logits_batch = make_view(logits, {1, rows, classes}, {rows * classes, classes, 1},
                                          logits.storage_offset());
    const Tensor x_rows = rows_of(x, first, rows);
    const Tensor labels_rows = make_view(labels, {rows}, {1}, labels.storage_offset() + first);
    kernel.matmul(x_rows, weight_transposed, logits_batch);
    kernel.cross_entropy_forward(logits, labels_rows, options.ignore_index, options.label_smoothing,
                                 make_view(losses, {rows}, {1}, losses.storage_offset() + first),
                                 make_view(log_sum_exp, {rows}, {1}, log_sum_exp.storage_offset() + first));
    if (!grad_hidden && !grad_weight) continue;
    kernel.cross_entropy_backward(make_view(unit_grads, {rows}, {1}, unit_grads.storage_offset()), logits,
                                  make_view(log_sum_exp, {rows}, {1}, log_sum_exp.storage_offset() + first),
                                  labels_rows, options.ignore_index, options.label_smoothing, logits);
    if (grad_hidden) kernel.matmul_into(logits_batch, weight_batch, rows_of(hidden_grad_sum, first, rows), false);
    if (grad_weight) {
      const Tensor logits_transposed = make_view(logits, {1, classes, rows}, {0, 1, classes}, logits.storage_offset());
      kernel.matmul_into(logits_transposed, x_rows, rows_of(weight_grad_sum, 0, classes), first > 0);
    }
  }
  Tensor count;
  Tensor out = autograd::reduce_per_sample(losses, labels, options.reduction, options.ignore_index, count);

  if (grad_hidden || grad_weight) {
    // NOTE: the node's inputs are the caller's tensors, not autocast's 16-bit copies: each
    // gradient is scaled from its float32 sum straight into its tensor's dtype, not rounded
    // to 16 bits for the cast's node to widen again (two passes over the (V, C) weight).
    autograd::record(
        "LinearCrossEntropyBackward", out, {hidden_in, weight_in, target},
        autograd::saved(hidden_grad_sum, weight_grad_sum, count),
        [reduction = options.reduction, hidden_dtype = hidden_in.dtype(), weight_dtype = weight_in.dtype(),
         sum_dtype](const autograd::Node&, const Tensor& grad, const Tensor& saved_hidden_grad,
                    const Tensor& saved_weight_grad, const Tensor& saved_count) {
          // The scalar the per-row gradients are multiplied by: grad, over the count for the mean.
          const KernelTable& kernel = kernels(grad.device());
          Tensor factor = autograd::new_output({1}, sum_dtype, grad);
          kernel.copy(make_view(grad, {1}, {1}, grad.storage_offset()), factor);
          if (reduction == Reduction::Mean) {
            Tensor count = autograd::new_output({1}, sum_dtype, grad);
            kernel.copy(saved_count, count);
            kernel.binary(BinaryOp::Div, factor, count, factor);
          }
          return std::vector<Tensor>{scaled(saved_hidden_grad, factor, hidden_dtype),
                                     scaled(saved_weight_grad, factor, weight_dtype), Tensor()};
        });
  }
  return out;
}

}  // namespace mg
