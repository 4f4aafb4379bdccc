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
//
// Working sets. A training step's forward casts the same parameters every step, and one
// launch per cast costs more than the copy of a small weight (a ResNet-50 step: 55 launches).
// So when a region ends, the parameters it used, in order of first use, are remembered under
// the first of them, by weak references (no copy, and no parameter, is kept alive past the
// region). At the first miss of a later region that begins with that parameter, the caller
// casts every one still valid in one batch (autograd/copy.h's to_each) and keeps each copy
// as if it had been cast alone. What a region used becomes its set at its end, so a set
// that was wrong is relearned; copies cast ahead and never used are freed with the region's
// other copies.
#pragma once

#include <vector>

#include "memgrad/core/dtype.h"
#include "memgrad/core/tensor.h"

namespace mg::amp::detail {

// A parameter, as PyTorch's autocast cache understands one: a float32 leaf requiring grad.
bool is_weight_cast_cacheable(const Tensor& x);

// The copy of x in dtype kept in this region, or an undefined Tensor when there is none
// still valid; a copy found counts as used by the region (its working set). has_history:
// whether the caller records a graph. NOTE: a copy cast under no_grad has no history; it
// must not serve a later forward that records a graph, or the gradient would never reach
// the master weight.
Tensor find_weight_cast(const Tensor& x, DType dtype, bool has_history);

// Keeps cast, x's 16-bit copy made with (has_history) or without a graph for a use now,
// replacing any older copy of x, and tags its bytes AUTOCAST_CACHE.
void keep_weight_cast(const Tensor& x, Tensor cast, bool has_history);

// At this region's first miss (x, for a copy in dtype with or without history): the
// parameters that the last region to begin with x used, in that order, that are still
// valid for such a copy: alive and viewing the storage they did, still parameters, on a
// device type where autocast is on and casts to dtype, and cast then to dtype with the same
// has_history. Empty at any later miss of the region, in a region that learns no working
// set, or when no region began with x.
std::vector<Tensor> take_working_set(const Tensor& x, DType dtype, bool has_history);

// Keeps cast, made ahead of its use for a parameter of take_working_set's list, as
// keep_weight_cast does; it counts as used when find_weight_cast first returns it.
void keep_prefetched_weight_cast(const Tensor& x, Tensor cast, bool has_history);

// An outermost autocast region begins; with_working_set: whether it learns its working set
// and casts the last one ahead (autocast/autocast.cpp says which regions do).
void begin_weight_cast_region(bool with_working_set);

// The outermost autocast region has ended: frees every copy, and remembers what the region
// used as the working set of its first parameter (if it learns one).
void end_weight_cast_region();

}  // namespace mg::amp::detail
