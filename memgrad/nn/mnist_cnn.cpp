// nn/mnist_cnn.cpp — PyTorch's MNIST example net, built from the nn layers.
#include "memgrad/nn/mnist_cnn.h"

#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/error.h"

namespace mg::nn {

MnistCnn::MnistCnn(Shape image_shape, int64_t num_classes, Generator* generator, bool checkpoint_convolutions)
    : Module("MnistCnn"), checkpoint_convolutions_(checkpoint_convolutions) {
  MG_CHECK(image_shape.size() == 2 && image_shape[0] >= 6 && image_shape[1] >= 6, "MnistCnn: images of ",
           image_shape, " are too small; two 3x3 convolutions and a 2x2 pool need at least 6x6.");
  const int64_t pooled_features = 64 * ((image_shape[0] - 4) / 2) * ((image_shape[1] - 4) / 2);
  conv1 = register_module("conv1", std::make_shared<Conv2d>(1, 32, 3, Conv2dOptions{}, true, generator));
  conv2 = register_module("conv2", std::make_shared<Conv2d>(32, 64, 3, Conv2dOptions{}, true, generator));
  pool = register_module("pool", std::make_shared<MaxPool2d>(2));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(0.25));
  fc1 = register_module("fc1", std::make_shared<Linear>(pooled_features, 128, true, generator));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(0.5));
  fc2 = register_module("fc2", std::make_shared<Linear>(128, num_classes, true, generator));
}

Tensor MnistCnn::forward(const Tensor& input) {
  // The checkpoint's node keeps this function until backward; holding the layers by
  // shared_ptr keeps them alive that long.
  auto convolutions = [conv1 = conv1, conv2 = conv2, pool = pool](const Tensor& image) {
    Tensor x = mg::relu((*conv1)(image));  // (N, 32, H-2, W-2)
    x = mg::relu((*conv2)(x));             // (N, 64, H-4, W-4)
    return (*pool)(x);                     // (N, 64, (H-4)/2, (W-4)/2)
  };
  // NOTE: the checkpoint ends before dropout1, so it keeps only the image and its
  // recompute replays no random draws.
  Tensor x = checkpoint_convolutions_ && is_training() ? checkpoint(convolutions, input) : convolutions(input);
  x = (*dropout1)(x).flatten(1);         // (N, 64 * (H-4)/2 * (W-4)/2)
  x = (*dropout2)(mg::relu((*fc1)(x)));  // (N, 128)
  return (*fc2)(x);                      // (N, num_classes)
}

}  // namespace mg::nn
