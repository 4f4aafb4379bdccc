// core/print.h — the hook through which Tensor::str() names a tensor's grad_fn.
//
// A repr shows `grad_fn=<MulBackward>`, but core may not include autograd/ (a room only
// includes rooms below it), and to core a Node is an incomplete type. So autograd hands core
// a function that reads a Node's name: autograd::Node's constructor registers it. A tensor
// can only have a grad_fn after some Node was constructed, so the namer is always there
// when a repr needs it.
#pragma once

namespace mg {

namespace autograd {
class Node;
}

using GradFnNamer = const char* (*)(const autograd::Node& node);

// Cheap enough (one relaxed atomic store) to call from every Node's constructor.
void register_grad_fn_namer(GradFnNamer namer);

}  // namespace mg
