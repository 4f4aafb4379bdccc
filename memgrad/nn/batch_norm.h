// nn/batch_norm.h — BatchNorm2d: per-channel batch normalisation of (N, C, H, W) inputs,
// PyTorch's nn.BatchNorm2d with the same parameter and buffer names, so a state_dict
// matches torchvision's keys ("bn1.weight", "bn1.running_mean", "bn1.num_batches_tracked").
//
// Memory: weight and bias are PARAMETER; the running statistics and the counter are
// buffers (tagged PARAMETER too, see Module::register_buffer): 2 * C floats + 8 bytes.
#pragma once

#include <cstdint>

#include "memgrad/core/channel_sums.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

class BatchNorm2d : public Module {
 public:
  // affine: learn a per-channel scale (weight, starts at 1) and shift (bias, starts at 0).
  // track_running_stats: keep running_mean (starts at 0) and running_var (starts at 1),
  // updated with `momentum` in training and used in evaluation; without them evaluation
  // normalises with the batch's own statistics, as in PyTorch.
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true);

  // (N, num_features, H, W) -> same shape. In training mode also updates the running
  // statistics and increments num_batches_tracked (outside autograd).
  Tensor forward(const Tensor& input) override;
  // relu(forward(input)) in one pass over the input each way (mg::batch_norm_relu): what a
  // ResNet block does after most convolutions, without the ReLU's own read and write of
  // the activation in forward and backward. Named for a Recorder as this layer.
  // statistics (both forward_relu and forward_add_relu): the input's sums made by the
  // convolution before (nn::Conv2d::forward_with_statistics), which spare the statistics
  // pass in training (autograd/norm.h); undefined ones change nothing.
  Tensor forward_relu(const Tensor& input, const ChannelSums& statistics = {});
  // relu(forward(input) + residual), residual of the input's shape, in one pass over input
  // and residual (mg::batch_norm_add_relu): a residual block's end, without writing
  // forward(input) and reading it back. Named for a Recorder as this layer.
  Tensor forward_add_relu(const Tensor& input, const Tensor& residual, const ChannelSums& statistics = {});
  // As PyTorch prints it: "64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True".
  std::string extra_repr() const override;

  int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }

  Tensor weight;                // (C) float, undefined unless affine
  Tensor bias;                  // (C) float, undefined unless affine
  Tensor running_mean;          // (C) float, undefined unless track_running_stats
  Tensor running_var;           // (C) float, undefined unless track_running_stats
  Tensor num_batches_tracked;   // 0-d int64, undefined unless track_running_stats

 private:
  // relu(y + residual) when residual is defined, else relu(y) when relu, else y.
  Tensor normalise(const Tensor& input, bool relu, const Tensor& residual, const ChannelSums& statistics);

  int64_t num_features_;
  double eps_;
  double momentum_;
};

}  // namespace mg::nn
