// nn/mnist_cnn.h — the convolutional net of PyTorch's MNIST example (pytorch/examples,
// mnist/main.py), with its layer names, so state_dict keys ("conv1.weight", "fc1.bias")
// match a model trained there:
//
//   conv 1->32 3x3, ReLU, conv 32->64 3x3, ReLU, max-pool 2, dropout 0.25, flatten,
//   fc 9216->128, ReLU, dropout 0.5, fc 128->classes      (for 28x28 inputs)
//
// Memory: 1.2 M parameters, 97% of them in fc1; the activations are dominated by conv2's
// output (64 x 24 x 24 floats per image, saved for ReLU's and the pool's backward).
// checkpoint_convolutions runs conv1..pool under mg::checkpoint in training: their outputs
// are recomputed when backward reaches them, after the head's activations are freed.
// NOTE: that lowers the ACTIVATION peak (the end of the forward), not the step's: the
// step peaks inside the convolutions' backward, which holds their activations and
// gradients either way, and the recompute adds its output there (docs/memory.md).
#pragma once

#include <cstdint>
#include <memory>

#include "memgrad/core/random.h"
#include "memgrad/core/shape.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/conv.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/module.h"
#include "memgrad/nn/pooling.h"

namespace mg::nn {

class MnistCnn : public Module {
 public:
  // image_shape: (H, W) of the single-channel inputs; fc1 takes 64 * (H-4)/2 * (W-4)/2.
  explicit MnistCnn(Shape image_shape = {28, 28}, int64_t num_classes = 10, Generator* generator = nullptr,
                    bool checkpoint_convolutions = false);
  // (N, 1, H, W) -> (N, num_classes) logits.
  Tensor forward(const Tensor& input) override;

  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<Conv2d> conv2;
  std::shared_ptr<MaxPool2d> pool;
  std::shared_ptr<Dropout> dropout1;
  std::shared_ptr<Linear> fc1;
  std::shared_ptr<Dropout> dropout2;
  std::shared_ptr<Linear> fc2;

 private:
  bool checkpoint_convolutions_ = false;
};

}  // namespace mg::nn
