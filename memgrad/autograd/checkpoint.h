// autograd/checkpoint.h — gradient checkpointing (torch.utils.checkpoint): trade compute
// for activation memory.
//
//   Tensor y = mg::checkpoint([&](const Tensor& x) { return block->forward(x); }, x);
//
// The forward runs `fn` with grad mode off, so none of its intermediate results are saved;
// one CheckpointBackward node keeps only fn's inputs (ACTIVATION). When backward reaches
// that node it runs fn again with grad mode on and backpropagates through the recomputed
// graph, whose activations live only while that segment's backward runs. Memory: the
// activations of a whole network become those of its checkpoint inputs plus those of the
// largest segment; compute: one more forward of every checkpointed segment.
//
// NOTE: the recompute backpropagates with a nested call of the engine (reentrant style, as
// torch.utils.checkpoint(use_reentrant=True)); memgrad's engine needs no changes for it.
// Tensors that fn uses besides its inputs must be leaves (parameters, constants): their
// AccumulateGrad nodes run inside the nested backward. A captured non-leaf that requires
// grad would drag the outer graph into the nested backward; that is caught with an error
// that says to pass the tensor as an input.
//
// - Dropout replays exactly: the default generator's (seed, offset) at the forward is
//   restored around the recompute, and the outer state restored after it. (memgrad has one
//   generator for every device; a Generator passed explicitly to an op inside fn is the
//   caller's to keep in step.)
// - Batch norm in training mode does not update its running statistics a second time:
//   nn::BatchNorm2d asks is_recomputing().
// - Whenever grad mode is on the outputs require grad, even if no input does: without
//   recording the forward there is no telling whether fn reaches a parameter, and the
//   parameters of a network's first segment (whose input is the data) must get gradients.
// - Nested checkpoints work: inside the forward they just run fn (grad mode is off), and
//   during the recompute they record their own node.
// - With grad mode off at the call, checkpoint just runs fn.
//
// Selective checkpointing: with a CheckpointPolicy that keeps some op kinds
// (autograd/checkpoint_policy.h), the node also keeps the outputs those ops computed in the
// forward (ACTIVATION, released once the recompute has taken them, or after the node's
// backward under retain_graph), and the recompute takes them instead of running their
// kernels: only the cheap ops between them run again (autograd/selective_checkpoint.h).
// Memory lies between a whole-block checkpoint's and no checkpoint's; so does compute.
#pragma once

#include <functional>
#include <vector>

#include "memgrad/autograd/checkpoint_policy.h"
#include "memgrad/core/tensor.h"

namespace mg {

using CheckpointFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// fn(inputs) without saving its intermediates; any number of inputs and outputs (inputs may
// be undefined or not require grad; outputs that are not floating get no gradient). fn must
// compute the same thing when called again: same number, shapes and dtypes of outputs. `keep`:
// the op kinds whose outputs the node keeps; the default keeps none (whole-block).
std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs,
                               const CheckpointPolicy& keep = {});

// One tensor in, one tensor out.
Tensor checkpoint(const std::function<Tensor(const Tensor& input)>& fn, const Tensor& input,
                  const CheckpointPolicy& keep = {});

namespace autograd {

// True while a checkpoint is running its function again for backward: code with side
// effects that must happen once per step (batch norm's running statistics) skips them.
bool is_recomputing();

}  // namespace autograd

}  // namespace mg
