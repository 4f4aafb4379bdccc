// autograd/autocast_operands.cpp — an op's operands cast as autocast's policy says, through
// the differentiable to(), with parameters' copies kept in the weight-cast cache.
#include "memgrad/autograd/autocast_operands.h"

#include "memgrad/autocast/cast_policy.h"
#include "memgrad/autocast/weight_cast_cache.h"
#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/grad_mode.h"

namespace mg::amp {

namespace {

Tensor cast_operand(const Tensor& x, CastPolicy policy) {
  const std::optional<DType> dtype = autocast_cast_dtype(x, policy);
  if (!dtype) return x;
  if (!detail::is_weight_cast_cacheable(x)) return to(x, *dtype);
  const bool has_history = GradMode::is_enabled();
  Tensor cast = detail::find_weight_cast(x, *dtype, has_history);
  if (!cast.defined()) {
    cast = to(x, *dtype);
    detail::keep_weight_cast(x, cast, has_history);
  }
  return cast;
}

}  // namespace

Tensor cast_to_autocast_dtype(const Tensor& x) { return cast_operand(x, CastPolicy::LowerPrecision); }

Tensor cast_to_float32(const Tensor& x) { return cast_operand(x, CastPolicy::Float32); }

}  // namespace mg::amp
