// nn/resnet.h — ResNet-18/34/50 with torchvision's structure, names and initialisation, so
// parameter counts and state_dict keys ("layer2.0.downsample.0.weight",
// "bn1.num_batches_tracked") match torchvision.models.resnet*.
//
// Memory: resnet18 holds 11.7 M parameters (44.7 MiB in float32), resnet50 25.6 M
// (97.5 MiB); every block's convolution saves its input for backward, so activation memory
// grows with batch * height * width, which the small-image stem keeps small for 32x32 data.
// ResNetOptions::checkpoint_stages trades compute for that memory (autograd/checkpoint.h).
// The forwards fuse every ReLU into the batch norm before it (BatchNorm2d::forward_relu),
// and a block's last batch norm, its shortcut's add and the ReLU into one op
// (BatchNorm2d::forward_add_relu: that batch norm's output is never written); the `relu`
// members stay registered so that the module tree prints as torchvision's.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "memgrad/core/random.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/batch_norm.h"
#include "memgrad/nn/block_checkpoint.h"
#include "memgrad/nn/conv.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/module.h"
#include "memgrad/nn/pooling.h"
#include "memgrad/nn/sequential.h"

namespace mg::nn {

struct ResNetOptions {
  int64_t num_classes = 1000;
  // A 3x3 stride-1 first convolution and no max pool, for 28x28 / 32x32 images (CIFAR,
  // MNIST): the ImageNet stem (7x7 stride 2, then max pool) would shrink them to 8x8 at once.
  bool small_image_stem = false;
  int64_t in_channels = 3;
  Generator* generator = nullptr;  // for every initial value; default: the global generator
  // In training, checkpoint the stem and each residual stage (layer1..layer4), a stage one
  // segment per residual block (nn/block_checkpoint.h). Whole: only the segments' inputs
  // stay saved through the forward, and each segment's activations are recomputed when
  // backward reaches it (one more forward of the trunk per step). Selective: the outputs
  // of checkpoint_policy's op kinds (the convolutions) stay too, and only batch norm, ReLU,
  // max-pool and the residual adds run again. The stem counts: at 224x224 its 112x112
  // activations are a large share of ResNet-50's.
  // NOTE: per block rather than per stage: the recompute is the same (every block runs
  // twice either way), but the backward's peak is one block's activations instead of a
  // whole stage's; for ResNet-50 (batch 2, CPU) the ACTIVATION peak falls 70.4% below the
  // unchecked step's instead of 59.3%, and the total peak is lower too.
  BlockCheckpoint checkpoint_stages = BlockCheckpoint::None;
  CheckpointPolicy checkpoint_policy = CheckpointPolicy::convolutions();
};

// Two 3x3 convolutions and a shortcut (ResNet-18/34). Output channels: planes.
class BasicBlock : public Module {
 public:
  static constexpr int64_t expansion = 1;
  // downsample (may be null) maps the input onto the output's shape when stride != 1 or
  // the channel count changes.
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride = 1, std::shared_ptr<Sequential> downsample = nullptr,
             Generator* generator = nullptr);
  Tensor forward(const Tensor& input) override;

  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<ReLU> relu;
  std::shared_ptr<Conv2d> conv2;
  std::shared_ptr<BatchNorm2d> bn2;
  std::shared_ptr<Sequential> downsample;  // null when the shortcut is the identity
};

// 1x1 reduce, 3x3 (carrying the stride, as torchvision's "ResNet v1.5"), 1x1 expand, and a
// shortcut (ResNet-50). Output channels: planes * 4.
class Bottleneck : public Module {
 public:
  static constexpr int64_t expansion = 4;
  Bottleneck(int64_t in_planes, int64_t planes, int64_t stride = 1, std::shared_ptr<Sequential> downsample = nullptr,
             Generator* generator = nullptr);
  Tensor forward(const Tensor& input) override;

  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<Conv2d> conv2;
  std::shared_ptr<BatchNorm2d> bn2;
  std::shared_ptr<Conv2d> conv3;
  std::shared_ptr<BatchNorm2d> bn3;
  std::shared_ptr<ReLU> relu;
  std::shared_ptr<Sequential> downsample;  // null when the shortcut is the identity
};

enum class ResNetBlock { Basic, Bottleneck };

class ResNet : public Module {
 public:
  // blocks_per_layer: how many blocks each of layer1..layer4 holds ({2, 2, 2, 2} for 18).
  ResNet(ResNetBlock block, std::array<int64_t, 4> blocks_per_layer, const ResNetOptions& options = {});
  // (N, in_channels, H, W) -> (N, num_classes) logits.
  Tensor forward(const Tensor& input) override;

  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<ReLU> relu;
  std::shared_ptr<MaxPool2d> maxpool;  // null with the small-image stem
  std::shared_ptr<Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<Linear> fc;

 private:
  std::shared_ptr<Sequential> make_layer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride,
                                         Generator* generator);
  // The stem (conv1, bn1 with its ReLU, maxpool) and one residual stage, checkpointed or not.
  Tensor run_stem(const Tensor& input);
  Tensor run_stage(const std::shared_ptr<Sequential>& stage, const Tensor& input);
  int64_t in_planes_ = 64;  // the channels the next block receives, while building
  BlockCheckpoint checkpoint_stages_ = BlockCheckpoint::None;
  CheckpointPolicy checkpoint_policy_;
};

std::shared_ptr<ResNet> resnet18(const ResNetOptions& options = {});
std::shared_ptr<ResNet> resnet34(const ResNetOptions& options = {});
std::shared_ptr<ResNet> resnet50(const ResNetOptions& options = {});

}  // namespace mg::nn
