// examples/memory_lab/models.h — the networks and batches the experiments measure: small
// MLPs, and GPTs (nn/gpt.h) with a training step as nanoGPT's (AdamW with weight-decay
// groups, optional 16-bit autocast with float32 master weights).
//
// Batches are tagged INPUT, as the data loader tags them, so that only what autograd saves
// counts as ACTIVATION (a TEMPORARY tensor becomes ACTIVATION when a node saves it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <memgrad/core/device.h>
#include <memgrad/core/dtype.h>
#include <memgrad/core/tensor.h>
#include <memgrad/nn/gpt.h>
#include <memgrad/nn/sequential.h>
#include <memgrad/optim/adam.h>

namespace memory_lab {

struct MlpShape {
  int64_t inputs;
  std::vector<int64_t> hidden;  // one Linear + ReLU per entry
  int64_t classes;
};

// Linear + ReLU per hidden width, then a Linear to the classes; fixed seed, on `device`.
std::shared_ptr<mg::nn::Sequential> make_mlp(const MlpShape& shape, mg::Device device);

// (batch, features) standard-normal values, tagged INPUT.
mg::Tensor make_inputs(int64_t batch, int64_t features, mg::Device device);
// (batch) int64 class indices, tagged INPUT.
mg::Tensor make_targets(int64_t batch, int64_t classes, mg::Device device);

// The bytes one float32 forward and cross-entropy of `batch` samples save for backward:
// every ReLU output (batch x width x 4), the logits (batch x classes x 4), one log-sum-exp
// per row (batch x 4) and the 4-byte count of targets. The input is INPUT, the weights
// PARAMETER, so neither counts.
inline int64_t mlp_saved_bytes(const MlpShape& shape, int64_t batch) {
  int64_t bytes = batch * shape.classes * 4 + batch * 4 + 4;
  for (int64_t width : shape.hidden) bytes += batch * width * 4;
  return bytes;
}

// Bytes of the model's parameters: sum of numel x element size.
int64_t parameter_bytes(const mg::nn::Module& model);

// A linear layer's forward and backward, plain and under the device's autocast dtype:
// libraries create their per-stream workspaces at their first call (cuBLAS on CUDA), which
// should happen here, not inside an experiment's measurement.
void warm_up(mg::Device device);

// Forward, cross-entropy and backward of one batch; returns the loss (its graph released).
mg::Tensor train_step_backward(mg::nn::Module& model, const mg::Tensor& inputs, const mg::Tensor& targets);

// A GPT with `options`, weights from the lab's seed, on `device`, in training mode.
std::shared_ptr<mg::nn::GPT> make_gpt(const mg::nn::GPTOptions& options, mg::Device device);
// (batch, sequence) int64 token ids below `vocab`, tagged INPUT; `stream` picks one of
// several independent draws (inputs 0, targets 1).
mg::Tensor make_tokens(int64_t batch, int64_t sequence, int64_t vocab, mg::Device device, uint64_t stream);
// AdamW as nanoGPT configures it: weight decay 0.1 on the matrices, none on the biases
// and LayerNorms (optim::weight_decay_groups).
mg::optim::AdamW make_adamw(const mg::nn::Module& model);

// One training step of a model whose output's last dim holds the classes (a GPT's
// (B, T, vocab) logits, a classifier's (B, classes)) against `targets` of its other dims:
// zero_grad (set to none), the forward and the cross-entropy under autocast in `autocast`
// when set (bfloat16 needs no loss scaling), backward outside it, an optimizer step.
void autocast_train_step(mg::nn::Module& model, mg::optim::Optimizer& optimizer, const mg::Tensor& inputs,
                         const mg::Tensor& targets, std::optional<mg::DType> autocast);

}  // namespace memory_lab
