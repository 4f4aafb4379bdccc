// autograd/engine.h — backward: runs the recorded graph from the roots to the leaves.
#pragma once

#include <functional>
#include <vector>

#include "memgrad/core/memory_format.h"
#include "memgrad/core/tensor.h"

namespace mg::autograd {

class Node;

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

// Runs `callback` when the backward now running on this thread ends: after its last node,
// before backward() returns (as PyTorch's Variable._execution_engine.queue_callback); how
// data-parallel training waits for its last reductions once every gradient is in. Called
// from a node or hook inside backward; outside one it throws. Callbacks run in the order
// queued, and one may queue another (it runs too); an exception from one ends backward
// with it, dropping the rest.
//
// NOTE: a backward started inside another's node (checkpoint's recomputation) is part of
// the outer one: its callbacks run when the outermost backward ends, once every gradient of
// the user's backward() call is in, not after the recomputed segment's. A backward that
// throws drops the callbacks queued during it.
void queue_callback(std::function<void()> callback);
// True while a backward runs on this thread (inside its nodes and hooks).
bool in_backward();
// True while a backward runs on this thread that no other backward's node started (not
// checkpoint's recomputation, whose caller reads the gradients it leaves right away).
bool in_outermost_backward();
// True while the backward running on this thread (the innermost) retains the graph: a node
// that could let go of saved tensors inside its apply() (a selective checkpoint's kept
// outputs, once its recompute has taken them) must keep them for the next backward.
bool retains_graph();

// Called by a node inside its apply(): the gradient that other consumers of the node's
// input `index` have already delivered, handed over so that the node adds its own into it
// in place (a convolution's backward lets cuDNN accumulate, beta = 1) instead of returning
// a new tensor that the engine would then add: the sum's extra pass over memory and its
// buffer are spared. Handed over only when the engine alone holds that gradient (no other
// handle to it or its storage) and it is exactly what the node would allocate: `dtype` on
// `device`, `sizes` laid out densely in `format`; otherwise undefined, and the node returns its gradient as usual. A node that
// takes the gradient returns it, with its own added, as that input's gradient.
// NOTE: the sum is then formed in the node's own arithmetic (for cuDNN, the float32
// epilogue rounds once), so it may differ from add()'s in the last bit.
Tensor take_delivered_gradient(const Node& node, size_t index, const Shape& sizes, MemoryFormat format, DType dtype,
                               Device device);

// Called by a node inside its apply(): whether it is the only consumer that will deliver a
// gradient to its input `index`'s producer in this backward (no other edge into that node
// is still to run, none has delivered one), and no hook or retain_grad() watches that
// gradient. Then what the node returns for that input is read by the producer alone, which
// lets the two share work (autograd/relu_batch_norm_node.h).
bool is_sole_consumer(const Node& node, size_t index);

}  // namespace mg::autograd
