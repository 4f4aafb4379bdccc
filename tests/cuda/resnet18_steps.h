// tests/cuda/resnet18_steps.h — a few ResNet-18 training steps on the GPU, for tests that
// run the same steps two ways (launched early or in order, weight gradients on a side
// stream or not) and compare what they leave bit for bit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/nn/nn.h"
#include "memgrad/optim/optim.h"
#include "cuda/kernel_checks.h"

namespace mg_test {

// ResNet-18 (small stem) after `steps` SGD steps (momentum, Nesterov) under float16
// autocast, channels_last, on a fixed batch of 32: its parameters and buffers, and the last
// loss.
inline std::vector<mg::Tensor> trained_resnet18(int steps) {
  using namespace mg;
  const Device cuda = Device::cuda();
  Generator generator(11);
  std::shared_ptr<nn::ResNet> model =
      nn::resnet18({.num_classes = 10, .small_image_stem = true, .generator = &generator});
  model->to(cuda);
  model->to(MemoryFormat::ChannelsLast);
  optim::SGD optimizer(model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
  const Tensor input = randn({32, 3, 32, 32}, {}, &generator).to(cuda).contiguous(MemoryFormat::ChannelsLast);
  const Tensor target = randint(0, 10, {32}, {.dtype = DType::Int64}, &generator).to(cuda);
  Tensor loss;
  for (int i = 0; i < steps; ++i) {
    optimizer.zero_grad();
    {
      amp::AutocastGuard mixed(DType::Float16);
      loss = cross_entropy((*model)(input), target);
    }
    loss.backward();
    optimizer.step();
  }
  std::vector<Tensor> state = model->parameters();
  for (const Tensor& buffer : model->buffers()) state.push_back(buffer);
  state.push_back(loss);
  return state;
}

// Each tensor of `actual` equals its twin in `expected` bit for bit.
inline void check_same(const std::vector<mg::Tensor>& actual, const std::vector<mg::Tensor>& expected,
                       const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    cuda_checks::check_equal(actual[i], expected[i], what + ": tensor " + std::to_string(i));
  }
}

}  // namespace mg_test
