// optim/clip_grad.h — gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
//
// Both work on the device and never read a value back to the host: the total norm and
// the clip coefficient stay 0-d tensors, and every gradient is scaled by the coefficient
// (min(1, ...)) even when no clipping is needed, so the training step has no host sync.
#pragma once

#include <limits>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg::optim {

// Scales the gradients of `parameters` in place so that their total norm (the norm of
// all gradients concatenated) is at most `max_norm`, and returns that total norm before
// clipping as a 0-d tensor on the gradients' device. norm_type is p (> 0) or
// std::numeric_limits<double>::infinity() for the max-abs norm. The norm accumulates in
// float32 (float64 if a gradient is float64) and is returned in the gradients' promoted
// dtype. Parameters without a gradient are skipped; with none, returns a zero and changes
// nothing.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0);

// Clamps every gradient of `parameters` in place to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace mg::optim
