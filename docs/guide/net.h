// docs/guide/net.h — the model the guide trains: a module with submodules (one of them a
// container), a parameter of its own and a forward written by hand ("Your model" in
// docs/guide.md shows the region).
#pragma once

#include <memgrad/memgrad.h>

// [guide: module]
struct NetOptions {
  int64_t inputs = 64;  // pixels of an 8x8 image
  int64_t hidden = 128;
  int64_t depth = 2;  // hidden layers between the input and the output layer
  int64_t classes = 10;
  int checkpoint_segments = 0;  // > 0: recompute the hidden layers in backward ("Bigger batches")
};

class Net : public mg::nn::Module {
 public:
  explicit Net(NetOptions options = {})
      : Module("Net"), checkpoint_segments_(options.checkpoint_segments) {
    input = register_module("input", std::make_shared<mg::nn::Linear>(options.inputs, options.hidden));
    body = register_module("body", std::make_shared<mg::nn::Sequential>());
    for (int64_t i = 0; i < options.depth; ++i) {
      body->push_back(std::make_shared<mg::nn::Linear>(options.hidden, options.hidden));
      body->push_back(std::make_shared<mg::nn::ReLU>());
    }
    output = register_module("output", std::make_shared<mg::nn::Linear>(options.hidden, options.classes));
    // A parameter of its own: one learned factor that sharpens or softens the logits.
    temperature = register_parameter("temperature", mg::ones({1}));
  }

  // (B, inputs) -> (B, classes) logits
  mg::Tensor forward(const mg::Tensor& x) override {
    mg::Tensor h = (*input)(x).relu();
    h = checkpoint_segments_ > 0 ? mg::nn::checkpoint_sequential(*body, checkpoint_segments_, h) : (*body)(h);
    return (*output)(h) * temperature;
  }

  std::shared_ptr<mg::nn::Linear> input, output;
  std::shared_ptr<mg::nn::Sequential> body;
  mg::Tensor temperature;

 private:
  int checkpoint_segments_;
};
// [guide: end]
