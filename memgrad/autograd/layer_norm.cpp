// autograd/layer_norm.cpp — layer_norm and add_layer_norm, forward and backward.
//
// The input is seen as (rows, cols), cols = the product of normalized_shape: each row is
// normalised on its own, so one kernel each way does the whole op. One node,
// LayerNormBackward, saves the input, the weight and per row the mean and 1/std (float32,
// float64 for a float64 input): 2 values a row instead of a normalised copy of the input.
// The bias is not saved: its gradient is the column sum of the incoming gradient.
//
// Under autocast (autocast/cast_policy.h) layer_norm runs in float32, as in PyTorch: 16-bit
// inputs, weight and bias are cast up, and the result is float32.
//
// add_layer_norm's node has two outputs, the sum (0) and the normalised sum (1), and gets
// both gradients at once: one kernel computes the norm's backward and adds the sum's own
// gradient, which is then the gradient of both addends.
#include "memgrad/autograd/layer_norm.h"

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/core/dtype.h"

namespace mg {

namespace {

// weight or bias: normalized_shape's sizes, on the input's device, of the input's dtype
// (or float32 with a 16-bit input, as mixed-precision models keep their parameters).
void check_affine(const char* what, const Tensor& values, const Tensor& x, const Shape& normalized_shape) {
  if (!values.defined()) return;
  MG_CHECK(values.sizes() == normalized_shape, "layer_norm: expected ", what, " of shape ", normalized_shape,
           " (normalized_shape), got shape ", values.sizes(), ". Hint: size it as the normalised trailing dims.");
  autograd::check_same_device("layer_norm", x, values);
  MG_CHECK(values.dtype() == x.dtype() || (values.dtype() == DType::Float32 && is_16_bit_float(x.dtype())),
           "layer_norm: expected ", what, " of the input's dtype ", x.dtype(),
           is_16_bit_float(x.dtype()) ? " (or float32)" : "", ", got ", values.dtype(), ". Hint: convert it with .to(",
           x.dtype(), "), or run the model under an AutocastGuard.");
}

void check_arguments(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                     double eps) {
  autograd::check_defined("layer_norm", x);
  autograd::check_floating("layer_norm", x);
  const int normalised_dims = normalized_shape.size();
  MG_CHECK(normalised_dims >= 1 && normalized_shape.numel() > 0,
           "layer_norm: expected a normalized_shape of at least one dim and one element, got ", normalized_shape,
           ". Hint: pass the sizes of the trailing dims to normalise, e.g. {", x.dim() > 0 ? x.sizes()[x.dim() - 1] : 1,
           "}.");
  bool trailing_match = x.dim() >= normalised_dims;
  for (int d = 0; trailing_match && d < normalised_dims; ++d) {
    trailing_match = x.sizes()[x.dim() - normalised_dims + d] == normalized_shape[d];
  }
  MG_CHECK(trailing_match, "layer_norm: the input's trailing dims must equal normalized_shape ", normalized_shape,
           ", got input of shape ", x.sizes(), ". Hint: normalized_shape is the shape of the last dims, e.g. {",
           x.dim() > 0 ? x.sizes()[x.dim() - 1] : 1, "} for the last one.");
  check_affine("weight", weight, x, normalized_shape);
  check_affine("bias", bias, x, normalized_shape);
  MG_CHECK(!weight.defined() || !bias.defined() || weight.dtype() == bias.dtype(),
           "layer_norm: expected weight and bias of one dtype, got ", weight.dtype(), " and ", bias.dtype(),
           ". Hint: convert one of them.");
  MG_CHECK(eps >= 0, "layer_norm: expected a non-negative eps, got ", eps);
}

// The (cols) view of a weight or bias, contiguous, for the kernels.
Tensor as_columns(const Tensor& values) {
  if (!values.defined()) return values;
  Tensor dense = values.is_contiguous() ? values : contiguous_copy(values);
  return make_view(dense, {dense.numel()}, {1}, dense.storage_offset());
}

// A contiguous tensor seen as (rows, cols).
Tensor as_rows(const Tensor& dense, int64_t cols) {
  return make_view(dense, {dense.numel() / cols, cols}, {cols, 1}, dense.storage_offset());
}

Tensor layer_norm_in_given_dtype(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                 const Tensor& bias, double eps) {
  check_arguments(x, normalized_shape, weight, bias, eps);
  const int64_t cols = normalized_shape.numel();
  const int64_t rows = x.numel() / cols;
  Tensor input = x.is_contiguous() ? x : contiguous_copy(x);
  Tensor out = autograd::new_output(x.sizes(), x.dtype(), x);
  const DType stats_dtype = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor save_mean = autograd::new_output({rows}, stats_dtype, x);
  Tensor save_invstd = autograd::new_output({rows}, stats_dtype, x);
  Tensor weight_columns = as_columns(weight);
  kernels(x.device()).layer_norm(as_rows(input, cols), Tensor(), weight_columns, as_columns(bias), eps, Tensor(),
                                 as_rows(out, cols), save_mean, save_invstd);

  if (autograd::needs_grad(x, weight, bias)) {
    DType bias_dtype = bias.defined() ? bias.dtype() : x.dtype();
    autograd::record(
        "LayerNormBackward", out, {x, weight, bias}, autograd::saved(input, weight_columns, save_mean, save_invstd),
        [cols, normalized_shape, bias_dtype](const autograd::Node& node, const Tensor& grad, const Tensor& saved_input,
                                             const Tensor& saved_weight, const Tensor& saved_mean,
                                             const Tensor& saved_invstd) {
          Tensor grad_output = grad.is_contiguous() ? grad : contiguous_copy(grad);
          Tensor grad_input, grad_weight, grad_bias;
          if (node.needs_input_grad(0)) grad_input = autograd::new_output(saved_input.sizes(), saved_input.dtype(), grad);
          if (node.needs_input_grad(1)) grad_weight = autograd::new_output(normalized_shape, saved_weight.dtype(), grad);
          if (node.needs_input_grad(2)) grad_bias = autograd::new_output(normalized_shape, bias_dtype, grad);
          kernels(grad.device()).layer_norm_backward(
              as_rows(grad_output, cols), as_rows(saved_input, cols), saved_weight, saved_mean, saved_invstd, Tensor(),
              grad_input.defined() ? as_rows(grad_input, cols) : Tensor(), as_columns(grad_weight),
              as_columns(grad_bias));
          return std::vector<Tensor>{grad_input, grad_weight, grad_bias};
        });
  }
  return out;
}

using autograd::Node;

// add_layer_norm's node: outputs the sum (0) and the normalised sum (1); inputs the wider
// addend, the other one, weight and bias.
class AddLayerNormBackward final : public Node {
 public:
  AddLayerNormBackward(int64_t cols, Shape normalized_shape, DType narrow_dtype, DType bias_dtype,
                       autograd::SavedTensors<4>&& saved)
      : Node("AddLayerNormBackward", 2), cols_(cols), normalized_shape_(std::move(normalized_shape)),
        narrow_dtype_(narrow_dtype), bias_dtype_(bias_dtype), saved_(std::move(saved)) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override {
    const Tensor& grad_sum = grad_outputs[0];
    const Tensor& grad_output = grad_outputs[1];
    const bool addends = needs_input_grad(0) || needs_input_grad(1);
    Tensor total = grad_sum, grad_weight, grad_bias;  // total: the gradient of the sum
    if (grad_output.defined()) {
      const Tensor sum = saved_.tensors[0].unpack(name()), weight = saved_.tensors[1].unpack(name());
      const Tensor mean = saved_.tensors[2].unpack(name()), invstd = saved_.tensors[3].unpack(name());
      const Tensor incoming = grad_output.is_contiguous() ? grad_output : contiguous_copy(grad_output);
      Tensor added;
      if (grad_sum.defined()) added = grad_sum.is_contiguous() ? grad_sum : contiguous_copy(grad_sum);
      total = addends ? autograd::new_output(sum.sizes(), sum.dtype(), grad_output) : Tensor();
      if (needs_input_grad(2)) grad_weight = autograd::new_output(normalized_shape_, weight.dtype(), grad_output);
      if (needs_input_grad(3)) grad_bias = autograd::new_output(normalized_shape_, bias_dtype_, grad_output);
      kernels(grad_output.device()).layer_norm_backward(
          as_rows(incoming, cols_), as_rows(sum, cols_), weight, mean, invstd,
          added.defined() ? as_rows(added, cols_) : Tensor(), total.defined() ? as_rows(total, cols_) : Tensor(),
          as_columns(grad_weight), as_columns(grad_bias));
    }
    Tensor grad_wide, grad_narrow;
    if (total.defined() && needs_input_grad(0)) grad_wide = total;
    if (total.defined() && needs_input_grad(1)) {
      grad_narrow = total.dtype() == narrow_dtype_ ? total : converted_copy(total, narrow_dtype_, total.device());
    }
    return {grad_wide, grad_narrow, grad_weight, grad_bias};
  }

  void release_saved() override {
    for (autograd::SavedTensor& tensor : saved_.tensors) tensor.release();
  }

 private:
  int64_t cols_;
  Shape normalized_shape_;
  DType narrow_dtype_, bias_dtype_;
  autograd::SavedTensors<4> saved_;  // the sum, the weight's columns, mean and 1/std per row
};

// Whether one kernel can add `wide` (the promoted dtype's addend) and `narrow` and norm the sum.
bool fusable(const Tensor& wide, const Tensor& narrow) {
  return wide.sizes() == narrow.sizes() && wide.device() == narrow.device() &&
         (narrow.dtype() == wide.dtype() || (wide.dtype() == DType::Float32 && is_16_bit_float(narrow.dtype())));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (amp::is_autocast_on_for(x)) {
    return layer_norm_in_given_dtype(amp::cast_to_float32(x), normalized_shape, amp::cast_to_float32(weight),
                                     amp::cast_to_float32(bias), eps);
  }
  return layer_norm_in_given_dtype(x, normalized_shape, weight, bias, eps);
}

SumAndNorm add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                          const Tensor& weight, const Tensor& bias, double eps) {
  autograd::check_defined("add_layer_norm", x);
  autograd::check_defined("add_layer_norm", residual);
  // The addend of the sum's dtype takes the kernel's input; addition commutes.
  const bool x_is_wide = promote_types(x.dtype(), residual.dtype()) == x.dtype();
  const Tensor& wide = x_is_wide ? x : residual;
  const Tensor& narrow = x_is_wide ? residual : x;
  const bool autocast = amp::is_autocast_on_for(wide);
  if (!fusable(wide, narrow) || (autocast && wide.dtype() != DType::Float32)) {
    Tensor sum = x + residual;
    return {sum, layer_norm(sum, normalized_shape, weight, bias, eps)};
  }
  const Tensor scale = autocast ? amp::cast_to_float32(weight) : weight;
  const Tensor shift = autocast ? amp::cast_to_float32(bias) : bias;
  check_arguments(wide, normalized_shape, scale, shift, eps);
  const int64_t cols = normalized_shape.numel();
  const Tensor input = wide.is_contiguous() ? wide : contiguous_copy(wide);
  const Tensor added = narrow.is_contiguous() ? narrow : contiguous_copy(narrow);
  SumAndNorm result{autograd::new_output(wide.sizes(), wide.dtype(), wide),
                    autograd::new_output(wide.sizes(), wide.dtype(), wide)};
  const DType stats_dtype = wide.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const int64_t rows = wide.numel() / cols;
  Tensor save_mean = autograd::new_output({rows}, stats_dtype, wide);
  Tensor save_invstd = autograd::new_output({rows}, stats_dtype, wide);
  const Tensor weight_columns = as_columns(scale);
  kernels(wide.device()).layer_norm(as_rows(input, cols), as_rows(added, cols), weight_columns, as_columns(shift), eps,
                                    as_rows(result.sum, cols), as_rows(result.output, cols), save_mean, save_invstd);

  if (autograd::needs_grad(wide, narrow, scale, shift)) {
    auto node = std::make_shared<AddLayerNormBackward>(
        cols, normalized_shape, narrow.dtype(), shift.defined() ? shift.dtype() : wide.dtype(),
        autograd::saved(result.sum, weight_columns, save_mean, save_invstd));
    // connect() makes the sum output 0 and sets the node's edges; the norm is output 1.
    autograd::connect(node, result.sum, {wide, narrow, scale, shift});
    AutogradMeta& meta = result.output.ensure_autograd_meta();
    meta.grad_fn = node;
    meta.output_nr = 1;
  }
  return result;
}

}  // namespace mg
