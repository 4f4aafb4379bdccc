// autocast/cast_policy.h — which op family autocast casts to what, as in PyTorch's autocast
// op lists. The policy only decides a dtype; the ops of autograd/ apply it, casting their
// operands differentiably (autograd/autocast_operands.h):
//   lower precision (inputs cast to the autocast dtype): matmul, linear, conv2d,
//                                                         scaled_dot_product_attention,
//                                                         linear_cross_entropy
//   float32 (16-bit inputs cast up, result float32):     softmax, log_softmax,
//                                                         nll_loss, sum, mean, layer_norm
//   float32 result computed in float32 from the 16-bit   cross_entropy (its gradient keeps
//   inputs as they are (no float32 copy):                the logits' dtype)
//   unchanged: everything else; binary elementwise ops promote to the widest input
//   dtype anyway, and batch_norm keeps float32 statistics for 16-bit inputs.
// Only float32/float16/bfloat16 tensors are cast (float64 and integer ones never), and only
// on device types where a guard enabled autocast.
#pragma once

#include <optional>

#include "memgrad/autocast/autocast.h"
#include "memgrad/core/dtype.h"
#include "memgrad/core/tensor.h"

namespace mg::amp {

// The two families whose operands autocast casts (the others keep their dtypes).
enum class CastPolicy {
  LowerPrecision,  // products: run in the autocast dtype of the operand's device type
  Float32,         // range- or accuracy-sensitive ops: run in float32
};

// The dtypes autocast casts from and to; float64 and integer tensors are left alone.
inline bool is_autocast_eligible(DType dtype) {
  return dtype == DType::Float32 || is_16_bit_float(dtype);
}

// The dtype autocast casts an operand x of an op under `policy` to; nullopt when autocast
// leaves x as it is (off for x's device type, x undefined or not eligible, or x already in
// that dtype).
inline std::optional<DType> autocast_cast_dtype(const Tensor& x, CastPolicy policy) {
  if (!is_autocast_on_for(x) || !is_autocast_eligible(x.dtype())) return std::nullopt;
  const DType dtype = policy == CastPolicy::LowerPrecision ? autocast_dtype(x.device().type) : DType::Float32;
  if (dtype == x.dtype()) return std::nullopt;
  return dtype;
}

}  // namespace mg::amp
