// nn/check_state_dict.h — whether a state dict fits a module, asked without loading it: for
// a caller that checks several states before it changes any (training/checkpoint.h loads a
// model, an optimizer, a GradScaler, ... from one file, all or nothing).
#pragma once

#include "memgrad/nn/module.h"

namespace mg::nn {

// Throws the mg::Error that module.load_state_dict(state, strict) would throw (every key,
// shape and dtype that does not fit, named), and changes nothing.
void check_state_dict(const Module& module, const NamedTensors& state, bool strict = true);

}  // namespace mg::nn
