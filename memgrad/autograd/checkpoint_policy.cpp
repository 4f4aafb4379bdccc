// autograd/checkpoint_policy.cpp — the op kinds' names and the policy's set of them.
#include "memgrad/autograd/checkpoint_policy.h"

namespace mg {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Matmul: return "matmul";
    case OpKind::Attention: return "attention";
    case OpKind::Convolution: return "convolution";
  }
  return "?";
}

CheckpointPolicy::CheckpointPolicy(std::initializer_list<OpKind> kept) {
  for (OpKind kind : kept) kept_mask_ |= 1u << static_cast<int>(kind);
}

std::string CheckpointPolicy::describe() const {
  std::string text;
  for (int index = 0; index < kOpKindCount; ++index) {
    const auto kind = static_cast<OpKind>(index);
    if (!keeps(kind)) continue;
    if (!text.empty()) text += ", ";
    text += op_kind_name(kind);
  }
  return text.empty() ? "nothing" : text;
}

}  // namespace mg
