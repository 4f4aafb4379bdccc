// autograd/engine.h — backward: runs the recorded graph from the roots to the leaves.
#pragma once

#include <vector>

#include "memgrad/core/tensor.h"

namespace mg::autograd {

// Computes gradients of `roots` (seeded with `grad_roots`; an undefined seed means ones,
// allowed for one-element roots only) and accumulates them into the leaves' .grad.
//
// Nodes run in dependency order, found by counting each node's incoming edges first (an
// iterative walk: a graph 10,000 ops deep does not touch the call stack). Among ready
// nodes the most recently created runs first. Each node's saved tensors are released as
// soon as it has run unless `retain_graph`. Under anomaly mode (anomaly_mode.h) each node's
// gradients are checked for NaN and Inf as soon as it returns them.
//
// The vectors are taken by value: a caller that moves them in (checkpoint's nested
// backward) lets each root's data and seed go as soon as the first node has consumed them,
// instead of holding them until the whole backward ends.
void backward(std::vector<Tensor> roots, std::vector<Tensor> grad_roots = {}, bool retain_graph = false);

}  // namespace mg::autograd
