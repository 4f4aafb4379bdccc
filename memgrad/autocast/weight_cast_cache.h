// autocast/weight_cast_cache.h — within the outermost autocast region, the 16-bit copy of
// each parameter (a float32 leaf that requires grad), so a weight used several times is cast
// once, as in PyTorch's autocast cache. This is only the storage: autograd's casts
// (autograd/autocast_operands.cpp) look copies up and keep the ones they make; the
// outermost guard's exit (autocast/autocast.cpp) frees them all.
//
// A copy is valid while its key is the same tensor (an address may be reused after a tensor
// dies), viewing the same storage (set_data swaps it), at the same version (an in-place
// update such as optimizer.step() bumps it, so a stale copy is never used). Its bytes are
// tagged AUTOCAST_CACHE in memory reports. The cache is per thread, like autocast's state.
#pragma once

#include "memgrad/core/dtype.h"
#include "memgrad/core/tensor.h"

namespace mg::amp::detail {

// A parameter, as PyTorch's autocast cache understands one: a float32 leaf requiring grad.
bool is_weight_cast_cacheable(const Tensor& x);

// The copy of x in dtype kept in this region, or an undefined Tensor when there is none
// still valid. has_history: whether the caller records a graph. NOTE: a copy cast under
// no_grad has no history; it must not serve a later forward that records a graph, or the
// gradient would never reach the master weight.
Tensor find_weight_cast(const Tensor& x, DType dtype, bool has_history);

// Keeps cast, x's 16-bit copy made with (has_history) or without a graph, replacing any
// older copy of x, and tags its bytes AUTOCAST_CACHE.
void keep_weight_cast(const Tensor& x, Tensor cast, bool has_history);

// Frees every copy: the outermost autocast region has ended.
void clear_weight_casts();

}  // namespace mg::amp::detail
