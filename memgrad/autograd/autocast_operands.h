// autograd/autocast_operands.h — the differentiable half of autocast: an op's operands cast
// to the dtype the cast policy gives them (autocast/cast_policy.h) through autograd's to(),
// so gradients flow back to the float32 master weights. A parameter's 16-bit copy comes from
// the weight-cast cache when a valid one is kept there, else is made and kept
// (autocast/weight_cast_cache.h).
//
// The ops of autograd/ call these when is_autocast_on_for(their first input)
// (autocast/autocast.h); they are in mg::amp with the rest of autocast's API.
#pragma once

#include "memgrad/core/tensor.h"

namespace mg::amp {

// x cast (differentiably) to the autocast dtype of its device type when it is an eligible
// float32/float16/bfloat16 tensor there; else x itself. Parameters come from the cache.
Tensor cast_to_autocast_dtype(const Tensor& x);
// x cast (differentiably) to float32 when it is a 16-bit floating tensor on a device type
// with autocast on; else x itself.
Tensor cast_to_float32(const Tensor& x);

}  // namespace mg::amp
