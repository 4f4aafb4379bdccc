// tests/distributed/ddp_test_support.h — what the DistributedDataParallel tests share (one
// process: test_ddp_single_process.cpp; under mpirun: mpi/test_ddp.cpp): small float64
// models (an MLP, a CNN, a ResNet-like net with batch norm) built from a seed, a global
// batch every rank can draw alike, and comparisons of gradients and parameters.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/autograd/loss.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/batch_norm.h"
#include "memgrad/nn/conv.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/pooling.h"
#include "memgrad/nn/resnet.h"
#include "memgrad/nn/sequential.h"

namespace mg_test::ddp {

using mg::Tensor;
using ModelFactory = std::function<std::shared_ptr<mg::nn::Module>(uint64_t seed)>;

inline constexpr int64_t kClasses = 3;

// 6 -> 16 -> 16 -> 3. Float64 gradient bytes, last registered first: 4.bias 24,
// 4.weight 384, 2.bias 128, 2.weight 2048, 0.bias 128, 0.weight 768 (3480 in all).
inline std::shared_ptr<mg::nn::Module> mlp(uint64_t seed) {
  mg::Generator generator(seed);
  auto model = std::make_shared<mg::nn::Sequential>(
      std::make_shared<mg::nn::Linear>(6, 16, true, &generator), std::make_shared<mg::nn::ReLU>(),
      std::make_shared<mg::nn::Linear>(16, 16, true, &generator), std::make_shared<mg::nn::ReLU>(),
      std::make_shared<mg::nn::Linear>(16, kClasses, true, &generator));
  model->to(mg::DType::Float64);
  return model;
}
inline Tensor mlp_input(int64_t batch, mg::Generator& generator) {
  return mg::randn({batch, 6}, {.dtype = mg::DType::Float64}, &generator);
}

// (N, 2, 8, 8): conv, ReLU, max-pool, conv, ReLU, flatten, linear.
inline std::shared_ptr<mg::nn::Module> cnn(uint64_t seed) {
  mg::Generator generator(seed);
  const mg::Conv2dOptions same{.padding = {1, 1}};
  auto model = std::make_shared<mg::nn::Sequential>(
      std::make_shared<mg::nn::Conv2d>(2, 4, 3, same, true, &generator), std::make_shared<mg::nn::ReLU>(),
      std::make_shared<mg::nn::MaxPool2d>(2), std::make_shared<mg::nn::Conv2d>(4, 6, 3, same, true, &generator),
      std::make_shared<mg::nn::ReLU>(), std::make_shared<mg::nn::Flatten>(),
      std::make_shared<mg::nn::Linear>(6 * 4 * 4, kClasses, true, &generator));
  model->to(mg::DType::Float64);
  return model;
}

// (N, 2, 8, 8): a ResNet stem (conv, batch norm, ReLU), one BasicBlock with a strided
// downsample (two more batch norms), average pool, linear: 3 batch norms, 9 buffers.
inline std::shared_ptr<mg::nn::Module> resnet(uint64_t seed) {
  mg::Generator generator(seed);
  const mg::Conv2dOptions same{.padding = {1, 1}};
  auto downsample = std::make_shared<mg::nn::Sequential>(
      std::make_shared<mg::nn::Conv2d>(4, 8, 1, mg::Conv2dOptions{.stride = {2, 2}}, false, &generator),
      std::make_shared<mg::nn::BatchNorm2d>(8));
  auto model = std::make_shared<mg::nn::Sequential>(
      std::make_shared<mg::nn::Conv2d>(2, 4, 3, same, false, &generator), std::make_shared<mg::nn::BatchNorm2d>(4),
      std::make_shared<mg::nn::ReLU>(), std::make_shared<mg::nn::BasicBlock>(4, 8, 2, downsample, &generator),
      std::make_shared<mg::nn::AdaptiveAvgPool2d>(std::array<int64_t, 2>{1, 1}),
      std::make_shared<mg::nn::Flatten>(), std::make_shared<mg::nn::Linear>(8, kClasses, true, &generator));
  model->to(mg::DType::Float64);
  return model;
}
inline Tensor image_input(int64_t batch, mg::Generator& generator) {
  return mg::randn({batch, 2, 8, 8}, {.dtype = mg::DType::Float64}, &generator);
}

// A global batch that every rank draws alike from the same seed; rank r trains on its
// rows [r * per_rank, (r + 1) * per_rank).
struct Batch {
  Tensor input;
  Tensor target;  // int64 classes

  Batch rows(int64_t first, int64_t count) const {
    return {input.narrow(0, first, count).contiguous(), target.narrow(0, first, count).contiguous()};
  }
};
inline Batch draw_batch(int64_t size, uint64_t seed, const std::function<Tensor(int64_t, mg::Generator&)>& input) {
  mg::Generator generator(seed);
  Tensor x = input(size, generator);
  Tensor y = mg::randint(0, kClasses, {size}, {.dtype = mg::DType::Int64}, &generator);
  return {x, y};
}

inline Tensor loss_of(mg::nn::Module& model, const Batch& batch) {
  return mg::cross_entropy(model(batch.input), batch.target);
}

// max |a - b| over two lists of tensors of the same shapes.
inline double max_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double largest = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].defined());
    REQUIRE(b[i].defined());
    REQUIRE(a[i].sizes() == b[i].sizes());
    const std::vector<double> left = a[i].to(mg::DType::Float64).to_vector<double>();
    const std::vector<double> right = b[i].to(mg::DType::Float64).to_vector<double>();
    for (size_t j = 0; j < left.size(); ++j) largest = std::max(largest, std::abs(left[j] - right[j]));
  }
  return largest;
}

inline std::vector<Tensor> gradients_of(const mg::nn::Module& model) {
  std::vector<Tensor> grads;
  for (const Tensor& parameter : model.parameters()) grads.push_back(parameter.grad());
  return grads;
}

// Every parameter's and buffer's values, end to end, in float64.
inline std::vector<double> flat_state(const mg::nn::Module& model) {
  std::vector<double> values;
  for (const auto& [name, tensor] : model.state_dict()) {
    const std::vector<double> part = tensor.to(mg::DType::Float64).to_vector<double>();
    values.insert(values.end(), part.begin(), part.end());
  }
  return values;
}

}  // namespace mg_test::ddp
