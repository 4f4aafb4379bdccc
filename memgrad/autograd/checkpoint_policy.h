// autograd/checkpoint_policy.h — which ops' outputs a selective checkpoint keeps.
//
// A whole-block checkpoint (autograd/checkpoint.h) keeps only the block's inputs and runs
// the whole block again in backward. A selective one also keeps the outputs of the op kinds
// its policy names, the expensive ones, and runs only the rest again: the recompute takes
// each kept op's stored output instead of calling its kernel (PyTorch's selective
// activation checkpointing, torch.utils.checkpoint's context_fn with
// create_selective_checkpoint_contexts; TorchTitan keeps the matmuls and attention).
//
//   mg::CheckpointPolicy policy{mg::OpKind::Matmul, mg::OpKind::Attention};
//   y = mg::checkpoint(fn, {x}, policy)[0];
//
// The policy is data, a set of op kinds; an empty one keeps nothing (a whole-block
// checkpoint).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

namespace mg {

// The ops whose outputs a policy can keep: those whose kernels cost the most per byte of
// output. The cheap ops between them (norms, activations, dropout, adds, casts, views) are
// always recomputed.
enum class OpKind : uint8_t {
  Matmul,       // matmul and linear (every matrix product, the math attention path's included)
  Attention,    // fused scaled-dot-product attention: its output and log-sum-exp
  Convolution,  // conv2d (and the batch-norm statistics a fused convolution makes with it)
};
inline constexpr int kOpKindCount = 3;

const char* op_kind_name(OpKind kind);  // "matmul", "attention", "convolution"

class CheckpointPolicy {
 public:
  CheckpointPolicy() = default;  // keeps nothing
  CheckpointPolicy(std::initializer_list<OpKind> kept);

  // GPT blocks: the four projections, attention's products or its fused kernel.
  static CheckpointPolicy matmul_and_attention() { return {OpKind::Matmul, OpKind::Attention}; }
  // ResNet blocks: the convolutions; batch norm and ReLU are recomputed from their outputs.
  static CheckpointPolicy convolutions() { return {OpKind::Convolution}; }

  bool keeps(OpKind kind) const { return (kept_mask_ >> static_cast<int>(kind)) & 1u; }
  bool keeps_nothing() const { return kept_mask_ == 0; }
  // "matmul, attention", or "nothing".
  std::string describe() const;

  bool operator==(const CheckpointPolicy& other) const = default;

 private:
  uint32_t kept_mask_ = 0;  // bit k: OpKind k is kept
};

}  // namespace mg
