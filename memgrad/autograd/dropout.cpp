// autograd/dropout.cpp — inverted dropout, forward and backward.
//
// The forward kernel draws the mask from Philox at a counter range reserved from the
// generator, so (seed, offset) reproduces it on any device. Backward needs only the mask
// (1 byte per element, saved as ACTIVATION) and the scale, never the input or output.
#include "memgrad/autograd/dropout.h"

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"

namespace mg {

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  autograd::check_defined("dropout", x);
  MG_CHECK(p >= 0.0 && p <= 1.0, "dropout: the probability p must be in [0, 1], got ", p, " (input of shape ",
           x.sizes(), ")");
  if (!training || p == 0.0) return x;
  autograd::check_floating("dropout", x);

  if (p == 1.0) {
    // Everything is dropped: the scale 1/(1-p) would be infinite, and the gradient is zero.
    Tensor output = zeros_like(x);
    if (autograd::needs_grad(x)) {
      autograd::record("DropoutBackward", output, {x}, autograd::saved(),
                       [](const autograd::Node&, const Tensor& grad) { return std::vector<Tensor>{zeros_like(grad)}; });
    }
    return output;
  }

  Tensor input = contiguous(x);
  Generator& source = generator ? *generator : default_generator();
  Tensor mask = autograd::new_output(input.sizes(), DType::Bool, input);
  Tensor output = autograd::new_output(input.sizes(), input.dtype(), input);
  kernels(input.device()).dropout(input, p, source.reserve(input.numel(), input.device()), mask, output);
  if (autograd::needs_grad(input)) {
    double scale = 1.0 / (1.0 - p);
    autograd::record("DropoutBackward", output, {input}, autograd::saved(mask),
                     [scale](const autograd::Node&, const Tensor& incoming, const Tensor& saved_mask) {
                       // The mask is row-major, so the gradient must be too (it may arrive
                       // channels_last from the op that consumed the output).
                       Tensor grad = incoming.is_contiguous() ? incoming : contiguous_copy(incoming);
                       Tensor grad_input = autograd::new_output(grad.sizes(), grad.dtype(), grad);
                       kernels(grad.device()).masked_scale(grad, saved_mask, scale, grad_input);
                       return std::vector<Tensor>{grad_input};
                     });
  }
  return output;
}

}  // namespace mg
