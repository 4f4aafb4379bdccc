// examples/memory_lab/models.cpp — MLPs, GPTs and random batches for the experiments.
#include "examples/memory_lab/models.h"

#include <memgrad/autocast/autocast.h>
#include <memgrad/autograd/loss.h>
#include <memgrad/core/factory.h>
#include <memgrad/core/random.h>
#include <memgrad/nn/activation.h>
#include <memgrad/nn/linear.h>
#include <memgrad/optim/param_groups.h>

namespace memory_lab {
namespace {

// NOTE: one seed for every model and batch: the lab's figures are the same run after run.
constexpr uint64_t kSeed = 0;

}  // namespace

std::shared_ptr<mg::nn::Sequential> make_mlp(const MlpShape& shape, mg::Device device) {
  mg::Generator generator(kSeed);
  auto model = std::make_shared<mg::nn::Sequential>();
  int64_t width = shape.inputs;
  for (int64_t hidden : shape.hidden) {
    model->push_back(std::make_shared<mg::nn::Linear>(width, hidden, true, &generator));
    model->push_back(std::make_shared<mg::nn::ReLU>());
    width = hidden;
  }
  model->push_back(std::make_shared<mg::nn::Linear>(width, shape.classes, true, &generator));
  model->to(device);
  return model;
}

mg::Tensor make_inputs(int64_t batch, int64_t features, mg::Device device) {
  mg::Generator generator(kSeed);
  return mg::randn({batch, features}, {.device = device, .category = mg::MemoryCategory::Input}, &generator);
}

mg::Tensor make_targets(int64_t batch, int64_t classes, mg::Device device) {
  mg::Generator generator(kSeed);
  return mg::randint(0, classes, {batch},
                     {.dtype = mg::DType::Int64, .device = device, .category = mg::MemoryCategory::Input},
                     &generator);
}

int64_t parameter_bytes(const mg::nn::Module& model) {
  int64_t total = 0;
  for (const mg::Tensor& parameter : model.parameters()) total += static_cast<int64_t>(parameter.nbytes());
  return total;
}

void warm_up(mg::Device device) {
  auto model = make_mlp({.inputs = 64, .hidden = {64}, .classes = 10}, device);
  const mg::Tensor inputs = make_inputs(16, 64, device);
  const mg::Tensor targets = make_targets(16, 10, device);
  train_step_backward(*model, inputs, targets);
  mg::Tensor loss;
  {
    mg::amp::AutocastGuard autocast(mg::amp::autocast_dtype(device.type), device.type);
    loss = mg::cross_entropy((*model)(inputs), targets);
  }
  loss.backward();
}

mg::Tensor train_step_backward(mg::nn::Module& model, const mg::Tensor& inputs, const mg::Tensor& targets) {
  mg::Tensor loss = mg::cross_entropy(model(inputs), targets);
  loss.backward();
  return loss;
}

std::shared_ptr<mg::nn::GPT> make_gpt(const mg::nn::GPTOptions& options, mg::Device device) {
  mg::Generator generator(kSeed);
  auto model = std::make_shared<mg::nn::GPT>(options, &generator);
  model->to(device);
  return model;
}

mg::Tensor make_tokens(int64_t batch, int64_t sequence, int64_t vocab, mg::Device device, uint64_t stream) {
  mg::Generator generator(kSeed + 1 + stream);
  return mg::randint(0, vocab, {batch, sequence},
                     {.dtype = mg::DType::Int64, .device = device, .category = mg::MemoryCategory::Input},
                     &generator);
}

mg::optim::AdamW make_adamw(const mg::nn::Module& model) {
  return mg::optim::AdamW(mg::optim::weight_decay_groups(
      model, mg::optim::AdamWOptions{.lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = 0.1}));
}

void autocast_train_step(mg::nn::Module& model, mg::optim::Optimizer& optimizer, const mg::Tensor& inputs,
                         const mg::Tensor& targets, std::optional<mg::DType> autocast) {
  optimizer.zero_grad();
  mg::Tensor loss;
  {
    mg::amp::AutocastGuard guard(autocast.value_or(mg::DType::BFloat16), inputs.device().type, autocast.has_value());
    const mg::Tensor logits = model(inputs);  // (..., classes)
    loss = mg::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view({-1}));
  }
  loss.backward();
  optimizer.step();
}

}  // namespace memory_lab
