// autograd/mlp.cpp — mg::mlp, a transformer's c_proj(gelu(c_fc(x))) as one node: forward
// and backward side by side.
//
// The memory it saves: the chain linear -> gelu -> linear keeps gelu's input (the
// pre-activation, for gelu's gradient) AND its output (c_proj's input, for c_proj's weight
// gradient), two rows x hidden tensors. This node keeps the pre-activation only and
// recomputes gelu's output in backward, as a TEMPORARY that dies once c_proj's weight
// gradient is formed. For GPT-2 124M at batch 16, T 1024 in bfloat16 that is
// 16384 x 3072 x 2 B = 96 MiB of ACTIVATION a layer (docs/memory.md).
//
// Every matrix below is 2-D and contiguous: x (*, in) is seen as (rows, in), rows the product
// of the leading dims; the kernels' (1, R, C) batch form is a view of it.
#include "memgrad/autograd/mlp.h"

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/matrix_views.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/selective_checkpoint.h"
#include "memgrad/memory/context.h"

namespace mg {

using autograd::contiguous_matrix;
using autograd::contiguous_or_copy;
using autograd::needs_grad;
using autograd::new_output;
using autograd::Node;
using autograd::transposed;
using autograd::unsqueezed;

namespace {

UnaryOp gelu_op(bool tanh_form) { return tanh_form ? UnaryOp::GeluTanh : UnaryOp::Gelu; }

void check_weight_and_bias(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* layer,
                           int64_t in_features, const char* in_name) {
  autograd::check_defined("mlp", weight);
  autograd::check_same_device("mlp", x, weight);
  MG_CHECK(weight.dtype() == x.dtype(), "mlp: ", layer, "'s weight has dtype ", weight.dtype(), " but the input has ",
           x.dtype(), ". Hint: convert it with .to(input.dtype()), or run under autocast.");
  MG_CHECK(weight.dim() == 2 && weight.sizes()[1] == in_features, "mlp: ", layer, "'s weight has shape ",
           weight.sizes(), " but ", in_name, " has ", in_features, " features; expected [out_features, ",
           in_features, "]");
  if (!bias.defined()) return;
  autograd::check_same_device("mlp", x, bias);
  MG_CHECK(bias.dtype() == x.dtype(), "mlp: ", layer, "'s bias has dtype ", bias.dtype(), " but the input has ",
           x.dtype(), ". Hint: convert it with .to(input.dtype()).");
  MG_CHECK(bias.dim() == 1 && bias.sizes()[0] == weight.sizes()[0], "mlp: ", layer, "'s bias has shape ",
           bias.sizes(), " but its weight (shape ", weight.sizes(), ") has ", weight.sizes()[0],
           " output features; expected [", weight.sizes()[0], "]");
}

Tensor mlp_in_given_dtypes(const Tensor& x, const Tensor& fc_weight, const Tensor& fc_bias, const Tensor& proj_weight,
                           const Tensor& proj_bias, GeluApproximate approximate) {
  autograd::check_defined("mlp", x);
  autograd::check_floating("mlp", x);
  MG_CHECK(x.dim() >= 1, "mlp: input must have at least 1 dimension (*, in_features), got a 0-d tensor");
  check_weight_and_bias(x, fc_weight, fc_bias, "c_fc", x.sizes().back(), "the input");
  check_weight_and_bias(x, proj_weight, proj_bias, "c_proj", fc_weight.sizes()[0], "c_fc's output");
  const bool tanh_form = approximate == GeluApproximate::Tanh;
  const DType dtype = x.dtype();
  Shape hidden_sizes = x.sizes(), out_sizes = x.sizes();
  hidden_sizes[hidden_sizes.size() - 1] = fc_weight.sizes()[0];
  out_sizes[out_sizes.size() - 1] = proj_weight.sizes()[0];
  const KernelTable& kernel = kernels(x.device());

  // gelu(pre-activation): written by the same kernel call as the pre-activation, or — when
  // a selective checkpoint's recompute replays the pre-activation and not y — computed from
  // it. A TEMPORARY either way: nothing saves it.
  Tensor activation;
  Tensor pre_activation = autograd::kept_or_computed(OpKind::Matmul, "mlp c_fc", hidden_sizes, dtype, [&] {
    Tensor pre = new_output(hidden_sizes, dtype, x);
    activation = new_output(hidden_sizes, dtype, x);
    kernel.linear_gelu_forward(contiguous_matrix(x), contiguous_or_copy(fc_weight), contiguous_or_copy(fc_bias),
                               tanh_form, contiguous_matrix(pre), contiguous_matrix(activation));
    return pre;
  });
  Tensor out = autograd::kept_or_computed(OpKind::Matmul, "mlp c_proj", out_sizes, dtype, [&] {
    if (!activation.defined()) {
      activation = new_output(hidden_sizes, dtype, x);
      kernel.unary(gelu_op(tanh_form), contiguous_or_copy(pre_activation), activation);
    }
    Tensor product = new_output(out_sizes, dtype, x);
    autograd::linear_into(kernel, activation, proj_weight, proj_bias, product);
    return product;
  });

  if (needs_grad(x, fc_weight, fc_bias, proj_weight, proj_bias)) {
    // c_proj's weight gradient needs gelu's output (recomputed from the pre-activation); the
    // gradients through c_fc need the pre-activation and c_proj's weight, and then x (for
    // c_fc's weight) and c_fc's weight (for x).
    // c_proj's bias gradient alone needs nothing saved.
    const bool through_fc = needs_grad(x, fc_weight, fc_bias);
    const bool needs_pre = through_fc || needs_grad(proj_weight);
    autograd::record(
        "MlpBackward", out, {x, fc_weight, fc_bias, proj_weight, proj_bias},
        autograd::saved(needs_grad(fc_weight) ? x : Tensor(), needs_pre ? pre_activation : Tensor(),
                        needs_grad(x) ? fc_weight : Tensor(), through_fc ? proj_weight : Tensor()),
        [tanh_form, x_sizes = x.sizes()](const Node& node, const Tensor& grad, const Tensor& saved_x,
                                         const Tensor& saved_pre, const Tensor& saved_fc_weight,
                                         const Tensor& saved_proj_weight) {
          std::vector<Tensor> grads(5);
          if (node.needs_input_grad(4)) grads[4] = sum_to_size(grad, {grad.sizes().back()});
          if (!saved_pre.defined()) return grads;
          const KernelTable& kernel = kernels(grad.device());
          const DType dtype = grad.dtype();
          Tensor grad_rows = contiguous_matrix(grad);  // (R, out)
          Tensor pre = contiguous_matrix(saved_pre);   // (R, hidden)
          const int64_t rows = pre.sizes()[0], hidden = pre.sizes()[1];
          if (node.needs_input_grad(3)) {
            Tensor activation = new_output({rows, hidden}, dtype, grad);  // gelu(pre), recomputed
            kernel.unary(gelu_op(tanh_form), pre, activation);
            grads[3] = new_output({grad_rows.sizes()[1], hidden}, dtype, grad);  // (out, R) @ (R, hidden)
            kernel.matmul(transposed(unsqueezed(grad_rows, 0)), unsqueezed(activation, 0), unsqueezed(grads[3], 0));
          }
          if (!node.needs_input_grad(0) && !node.needs_input_grad(1) && !node.needs_input_grad(2)) return grads;

          // grad_pre = (grad @ proj_weight) * gelu'(pre) and c_fc's bias gradient, one call.
          Tensor grad_pre = new_output({rows, hidden}, dtype, grad);
          if (node.needs_input_grad(2)) grads[2] = new_output({hidden}, dtype, grad);
          kernel.linear_gelu_backward(grad_rows, contiguous_or_copy(saved_proj_weight), pre, tanh_form, grad_pre,
                                      grads[2]);
          if (node.needs_input_grad(1)) {
            Tensor input_rows = contiguous_matrix(saved_x);  // (R, in)
            grads[1] = new_output({hidden, input_rows.sizes()[1]}, dtype, grad);  // (hidden, R) @ (R, in)
            kernel.matmul(transposed(unsqueezed(grad_pre, 0)), unsqueezed(input_rows, 0), unsqueezed(grads[1], 0));
          }
          if (node.needs_input_grad(0)) {
            grads[0] = new_output(x_sizes, dtype, grad);  // (R, hidden) @ (hidden, in)
            Tensor fc_weight = contiguous_or_copy(saved_fc_weight);
            kernel.matmul(unsqueezed(grad_pre, 0), unsqueezed(fc_weight, 0), unsqueezed(contiguous_matrix(grads[0]), 0));
          }
          return grads;
        });
  }
  return out;
}

}  // namespace

// As linear: the products run in the autocast dtype inside an autocast region.
Tensor mlp(const Tensor& x, const Tensor& fc_weight, const Tensor& fc_bias, const Tensor& proj_weight,
           const Tensor& proj_bias, GeluApproximate approximate) {
  memory::OpScope scope("mlp");
  if (amp::is_autocast_on_for(x)) {
    return mlp_in_given_dtypes(amp::cast_to_autocast_dtype(x), amp::cast_to_autocast_dtype(fc_weight),
                               amp::cast_to_autocast_dtype(fc_bias), amp::cast_to_autocast_dtype(proj_weight),
                               amp::cast_to_autocast_dtype(proj_bias), approximate);
  }
  return mlp_in_given_dtypes(x, fc_weight, fc_bias, proj_weight, proj_bias, approximate);
}

}  // namespace mg
