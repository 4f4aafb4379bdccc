// nn/resnet.cpp — the residual blocks and the ResNet trunk, built and initialised as
// torchvision.models.resnet does.
#include "memgrad/nn/resnet.h"

#include <string>

#include "memgrad/autograd/shape.h"
#include "memgrad/nn/init.h"

namespace mg::nn {

namespace {

Conv2dOptions conv_options(int64_t stride, int64_t padding) {
  Conv2dOptions options;
  options.stride = {stride, stride};
  options.padding = {padding, padding};
  return options;
}

// No bias: the BatchNorm after every convolution would cancel it.
std::shared_ptr<Conv2d> conv3x3(int64_t in_planes, int64_t out_planes, int64_t stride, Generator* generator) {
  return std::make_shared<Conv2d>(in_planes, out_planes, 3, conv_options(stride, 1), false, generator);
}

std::shared_ptr<Conv2d> conv1x1(int64_t in_planes, int64_t out_planes, int64_t stride, Generator* generator) {
  return std::make_shared<Conv2d>(in_planes, out_planes, 1, conv_options(stride, 0), false, generator);
}

void reinit_convolutions(const Module& module, Generator* generator) {
  for (const auto& [name, child] : module.named_children()) {
    if (auto* conv = dynamic_cast<Conv2d*>(child.get())) {
      init::kaiming_normal_(conv->weight, 0.0, init::FanMode::FanOut, generator);
    }
    reinit_convolutions(*child, generator);
  }
}

// relu(bn(conv(x))) and relu(bn(conv(x)) + residual), the convolution handing the batch
// norm the statistics of its output where it makes them itself (see BasicBlock::forward). The
// convolution's output lives only inside the call (the batch norm saves it when training).
Tensor conv_bn_relu(Conv2d& conv, BatchNorm2d& bn, const Tensor& x) {
  const ConvWithStatistics y = conv.forward_with_statistics(x);
  return bn.forward_relu(y.output, y.statistics);
}
Tensor conv_bn_add_relu(Conv2d& conv, BatchNorm2d& bn, const Tensor& x, const Tensor& residual) {
  const ConvWithStatistics y = conv.forward_with_statistics(x);
  return bn.forward_add_relu(y.output, residual, y.statistics);
}

}  // namespace

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, std::shared_ptr<Sequential> downsample_module,
                       Generator* generator)
    : Module("BasicBlock") {
  // Registration order as torchvision's, so str() and state_dict() list the same order.
  conv1 = register_module("conv1", conv3x3(in_planes, planes, stride, generator));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  relu = register_module("relu", std::make_shared<ReLU>());
  conv2 = register_module("conv2", conv3x3(planes, planes, 1, generator));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  if (downsample_module) downsample = register_module("downsample", std::move(downsample_module));
}

// bn->forward_relu(x) is relu((*bn)(x)) and bn->forward_add_relu(x, shortcut)
// relu((*bn)(x) + shortcut), each one op (nn/batch_norm.h); each convolution hands the
// batch norm after it the statistics of its output where it makes them itself (training
// in 16-bit channels_last on cuDNN with cuda::set_cudnn_fusion on, the default: nn/conv.h's
// forward_with_statistics), which spares the batch norm's statistics pass.
// NOTE: the shortcut runs first, so that backward (newest node first) takes the residual
// branch right after the fused op and the downsample last: the other order leaves the
// gradient of the last convolution's output (the block's output size) waiting through
// the downsample's backward (ResNet-50 b128 float32, predicted: 205 MB more TEMPORARY at
// its peak, 130 MB more peak allocated with --checkpoint).
Tensor BasicBlock::forward(const Tensor& input) {
  Tensor identity = downsample ? (*downsample)(input) : input;
  Tensor out = conv_bn_relu(*conv1, *bn1, input);
  return conv_bn_add_relu(*conv2, *bn2, out, identity);
}

Bottleneck::Bottleneck(int64_t in_planes, int64_t planes, int64_t stride, std::shared_ptr<Sequential> downsample_module,
                       Generator* generator)
    : Module("Bottleneck") {
  conv1 = register_module("conv1", conv1x1(in_planes, planes, 1, generator));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, stride, generator));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  conv3 = register_module("conv3", conv1x1(planes, planes * expansion, 1, generator));
  bn3 = register_module("bn3", std::make_shared<BatchNorm2d>(planes * expansion));
  relu = register_module("relu", std::make_shared<ReLU>());
  if (downsample_module) downsample = register_module("downsample", std::move(downsample_module));
}

Tensor Bottleneck::forward(const Tensor& input) {
  Tensor identity = downsample ? (*downsample)(input) : input;
  Tensor out = conv_bn_relu(*conv1, *bn1, input);
  out = conv_bn_relu(*conv2, *bn2, out);
  return conv_bn_add_relu(*conv3, *bn3, out, identity);
}

ResNet::ResNet(ResNetBlock block, std::array<int64_t, 4> blocks_per_layer, const ResNetOptions& options)
    : Module("ResNet"), checkpoint_stages_(options.checkpoint_stages), checkpoint_policy_(options.checkpoint_policy) {
  MG_CHECK(options.num_classes > 0, "ResNet: num_classes=", options.num_classes, " must be positive");
  MG_CHECK(options.in_channels > 0, "ResNet: in_channels=", options.in_channels,
           " must be positive (3 for RGB images, 1 for grayscale such as MNIST)");
  Generator* generator = options.generator;
  if (options.small_image_stem) {
    conv1 = register_module("conv1", conv3x3(options.in_channels, 64, 1, generator));
  } else {
    conv1 = register_module("conv1", std::make_shared<Conv2d>(options.in_channels, 64, 7, conv_options(2, 3),
                                                              false, generator));
  }
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(64));
  relu = register_module("relu", std::make_shared<ReLU>());
  if (!options.small_image_stem) maxpool = register_module("maxpool", std::make_shared<MaxPool2d>(3, 2, 1));
  layer1 = register_module("layer1", make_layer(block, 64, blocks_per_layer[0], 1, generator));
  layer2 = register_module("layer2", make_layer(block, 128, blocks_per_layer[1], 2, generator));
  layer3 = register_module("layer3", make_layer(block, 256, blocks_per_layer[2], 2, generator));
  layer4 = register_module("layer4", make_layer(block, 512, blocks_per_layer[3], 2, generator));
  avgpool = register_module("avgpool", std::make_shared<AdaptiveAvgPool2d>(std::array<int64_t, 2>{1, 1}));
  fc = register_module("fc", std::make_shared<Linear>(in_planes_, options.num_classes, true, generator));

  // torchvision re-initialises every convolution for ReLU networks (He et al.: fan_out keeps
  // the gradients' scale); BatchNorm already starts at weight 1, bias 0, and fc keeps
  // Linear's default.
  // NOTE: walks named_children() by hand: named_modules() needs a shared_ptr to this,
  // which does not exist yet inside the constructor.
  reinit_convolutions(*this, generator);
}

std::shared_ptr<Sequential> ResNet::make_layer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride,
                                               Generator* generator) {
  MG_CHECK(blocks > 0, "ResNet: every layer needs at least one block, got ", blocks);
  int64_t expansion = block == ResNetBlock::Basic ? BasicBlock::expansion : Bottleneck::expansion;
  auto make_block = [&](int64_t in_planes, int64_t block_stride, std::shared_ptr<Sequential> downsample) {
    std::shared_ptr<Module> result;
    if (block == ResNetBlock::Basic) {
      result = std::make_shared<BasicBlock>(in_planes, planes, block_stride, std::move(downsample), generator);
    } else {
      result = std::make_shared<Bottleneck>(in_planes, planes, block_stride, std::move(downsample), generator);
    }
    return result;
  };

  std::shared_ptr<Sequential> downsample;
  if (stride != 1 || in_planes_ != planes * expansion) {
    downsample = std::make_shared<Sequential>(conv1x1(in_planes_, planes * expansion, stride, generator),
                                              std::make_shared<BatchNorm2d>(planes * expansion));
  }
  auto layer = std::make_shared<Sequential>();
  layer->push_back(make_block(in_planes_, stride, std::move(downsample)));
  in_planes_ = planes * expansion;
  for (int64_t index = 1; index < blocks; ++index) layer->push_back(make_block(in_planes_, 1, nullptr));
  return layer;
}

Tensor ResNet::forward(const Tensor& input) {
  MG_CHECK(input.dim() == 4 && input.size(1) == conv1->in_channels(), "ResNet: expected an input of shape (N, ",
           conv1->in_channels(), ", H, W), got ", input.sizes(),
           "; set ResNetOptions::in_channels to the images' channel count");
  Tensor x = run_stem(input);
  x = run_stage(layer4, run_stage(layer3, run_stage(layer2, run_stage(layer1, x))));
  x = flatten((*avgpool)(x), 1);
  return (*fc)(x);
}

Tensor ResNet::run_stem(const Tensor& input) {
  // NOTE: holds its modules by shared_ptr, as run_stage does: a checkpoint keeps the
  // function until backward.
  auto stem = [conv1 = conv1, bn1 = bn1, maxpool = maxpool](const Tensor& x) {
    Tensor y = conv_bn_relu(*conv1, *bn1, x);
    return maxpool ? (*maxpool)(y) : y;
  };
  if (checkpoint_stages_ == BlockCheckpoint::None || !is_training()) return stem(input);
  return run_block(checkpoint_stages_, checkpoint_policy_, stem, input);
}

Tensor ResNet::run_stage(const std::shared_ptr<Sequential>& stage, const Tensor& input) {
  if (checkpoint_stages_ == BlockCheckpoint::None || !is_training()) return (*stage)(input);
  // One segment per block (see ResNetOptions), named inside the stage as (*stage)(x)
  // would name them ("layer1.0"); each node keeps its block (a shared_ptr) until backward.
  NamedCall call(*stage);
  Tensor x = input;
  for (size_t index = 0; index < stage->size(); ++index) {
    x = run_block(checkpoint_stages_, checkpoint_policy_,
                  [block = (*stage)[index]](const Tensor& block_input) { return (*block)(block_input); }, x);
  }
  return x;
}

std::shared_ptr<ResNet> resnet18(const ResNetOptions& options) {
  return std::make_shared<ResNet>(ResNetBlock::Basic, std::array<int64_t, 4>{2, 2, 2, 2}, options);
}

std::shared_ptr<ResNet> resnet34(const ResNetOptions& options) {
  return std::make_shared<ResNet>(ResNetBlock::Basic, std::array<int64_t, 4>{3, 4, 6, 3}, options);
}

std::shared_ptr<ResNet> resnet50(const ResNetOptions& options) {
  return std::make_shared<ResNet>(ResNetBlock::Bottleneck, std::array<int64_t, 4>{3, 4, 6, 3}, options);
}

}  // namespace mg::nn
