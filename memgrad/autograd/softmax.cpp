// autograd/softmax.cpp — softmax and log_softmax along a dim, forward and backward.
//
// Both backward formulas need only the forward's output (softmax: dx = y * (g - sum(g * y));
// log_softmax: dx = g - exp(y) * sum(g)), so the node saves the output and the input's
// bytes are free to go as soon as nothing else holds them.
#include "memgrad/autograd/softmax.h"

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"

namespace mg {

namespace {

// The kernel walks lines along a dim, so a 0-d tensor becomes one line of one element.
Tensor as_lines(const Tensor& x) { return x.dim() == 0 ? make_view(x, {1}, {1}, x.storage_offset()) : x; }

Tensor softmax_in_given_dtype(const char* op, const Tensor& x, int64_t dim, bool log) {
  autograd::check_defined(op, x);
  autograd::check_floating(op, x);
  int wrapped_dim = wrap_dim(dim, x.dim());
  Tensor input = x.is_contiguous() ? x : contiguous_copy(x);
  Tensor out = autograd::new_output(x.sizes(), x.dtype(), x);
  kernels(x.device()).softmax(as_lines(input), wrapped_dim, log, as_lines(out));

  if (autograd::needs_grad(x)) {
    autograd::record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", out, {x}, autograd::saved(out),
                     [wrapped_dim, log](const autograd::Node&, const Tensor& grad, const Tensor& saved_output) {
                       Tensor grad_output = grad.is_contiguous() ? grad : contiguous_copy(grad);
                       Tensor grad_input = autograd::new_output(grad.sizes(), grad.dtype(), grad);
                       kernels(grad.device()).softmax_backward(as_lines(grad_output), as_lines(saved_output),
                                                               wrapped_dim, log, as_lines(grad_input));
                       return std::vector<Tensor>{grad_input};
                     });
  }
  return out;
}

// Autocast (autocast/cast_policy.h) runs softmax in float32: exp overflows float16, and the
// normalising sum would lose what little mantissa bfloat16 has.
Tensor softmax_along(const char* op, const Tensor& x, int64_t dim, bool log) {
  if (amp::is_autocast_on_for(x)) return softmax_in_given_dtype(op, amp::cast_to_float32(x), dim, log);
  return softmax_in_given_dtype(op, x, dim, log);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_along("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_along("log_softmax", x, dim, true); }

Tensor Tensor::softmax(int64_t dim) const { return mg::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return mg::log_softmax(*this, dim); }

}  // namespace mg
