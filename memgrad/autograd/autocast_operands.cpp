// autograd/autocast_operands.cpp — an op's operands cast as autocast's policy says, through
// the differentiable to(), with parameters' copies kept in the weight-cast cache; at a
// region's first miss, the working set of the region before it cast in one batch (to_each).
#include "memgrad/autograd/autocast_operands.h"

#include "memgrad/autocast/cast_policy.h"
#include "memgrad/autocast/weight_cast_cache.h"
#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/grad_mode.h"

namespace mg::amp {

namespace {

// At the region's first miss: the parameters that the last region to begin with x cast,
// cast now in one batch (one launch per device on a GPU) and kept for their uses.
void cast_working_set(const Tensor& x, DType dtype, bool has_history) {
  const std::vector<Tensor> parameters = detail::take_working_set(x, dtype, has_history);
  if (parameters.empty()) return;
  const std::vector<Tensor> casts = to_each(parameters, dtype);
  for (size_t i = 0; i < parameters.size(); ++i) {
    detail::keep_prefetched_weight_cast(parameters[i], casts[i], has_history);
  }
}

Tensor cast_operand(const Tensor& x, CastPolicy policy) {
  const std::optional<DType> dtype = autocast_cast_dtype(x, policy);
  if (!dtype) return x;
  if (!detail::is_weight_cast_cacheable(x)) return to(x, *dtype);
  const bool has_history = GradMode::is_enabled();
  Tensor cast = detail::find_weight_cast(x, *dtype, has_history);
  if (cast.defined()) return cast;
  cast_working_set(x, *dtype, has_history);
  cast = detail::find_weight_cast(x, *dtype, has_history);
  if (cast.defined()) return cast;
  cast = to(x, *dtype);
  detail::keep_weight_cast(x, cast, has_history);
  return cast;
}

}  // namespace

Tensor cast_to_autocast_dtype(const Tensor& x) { return cast_operand(x, CastPolicy::LowerPrecision); }

Tensor cast_to_float32(const Tensor& x) { return cast_operand(x, CastPolicy::Float32); }

}  // namespace mg::amp
