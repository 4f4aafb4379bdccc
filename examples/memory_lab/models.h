// examples/memory_lab/models.h — the small networks and batches the experiments measure.
//
// Batches are tagged INPUT, as the data loader tags them, so that only what autograd saves
// counts as ACTIVATION (a TEMPORARY tensor becomes ACTIVATION when a node saves it).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "nn/sequential.h"

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

}  // namespace memory_lab
