// tests/training/small_run.h — a small training run with every part a checkpoint holds,
// each of which changes at every step: an MLP with dropout (the default generator), Adam,
// a GradScaler on the CPU whose scale grows every 2 clean steps, a cosine schedule, and
// batches drawn from a generator of the run's own ("data").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/amp/grad_scaler.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/io/safetensors.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/sequential.h"
#include "memgrad/optim/adam.h"
#include "memgrad/optim/scheduler.h"
#include "memgrad/training/checkpoint.h"

namespace mg_test {

constexpr int64_t kRunSteps = 6;

struct SmallRun {
  explicit SmallRun(int64_t hidden = 16)
      : model(make_model(hidden)),
        optimizer(model->parameters(), mg::optim::AdamOptions{.lr = 1e-2}),
        scaler({.init_scale = 1024.0, .growth_interval = 2}),
        scheduler(optimizer, kRunSteps),
        data(7) {
    mg::manual_seed(3);
  }

  static std::shared_ptr<mg::nn::Module> make_model(int64_t hidden) {
    mg::Generator init(1);
    return std::make_shared<mg::nn::Sequential>(std::make_shared<mg::nn::Linear>(8, hidden, true, &init),
                                                std::make_shared<mg::nn::Dropout>(0.3),
                                                std::make_shared<mg::nn::ReLU>(),
                                                std::make_shared<mg::nn::Linear>(hidden, 4, true, &init));
  }

  void train(int64_t steps) {
    for (int64_t i = 0; i < steps; ++i) {
      const mg::Tensor inputs = mg::randn({16, 8}, {}, &data);
      const mg::Tensor targets = mg::randn({16, 4}, {}, &data);
      optimizer.zero_grad();
      scaler.scale(mg::mse_loss((*model)(inputs), targets)).backward();
      scaler.step(optimizer);
      scaler.update();
      scheduler.step();
      ++step;
    }
  }

  mg::CheckpointParts parts() const {
    return {.model = model.get(),
            .optimizer = &optimizer,
            .scaler = &scaler,
            .scheduler = &scheduler,
            .generators = {{"data", &data}},
            .step = step,
            .epoch = step / 3,
            .metadata = {{"note", "small run"}},
            .tensors = {{"losses", mg::from_vector(std::vector<double>{1.5, 0.25}, {2})}}};
  }

  mg::CheckpointTargets targets() {
    return {.model = model.get(),
            .optimizer = &optimizer,
            .scaler = &scaler,
            .scheduler = &scheduler,
            .generators = {{"data", &data}}};
  }

  std::shared_ptr<mg::nn::Module> model;
  mg::optim::Adam optimizer;
  mg::amp::GradScaler scaler;
  mg::optim::CosineAnnealingLR scheduler;
  mg::Generator data;
  int64_t step = 0;
};

// A safetensors file's tensors by name, as raw bytes (two checkpoints compare exactly).
inline std::map<std::string, std::vector<uint8_t>> file_bytes(const std::string& path) {
  std::map<std::string, std::vector<uint8_t>> bytes;
  for (const auto& [name, tensor] : mg::load_safetensors(path)) {
    const auto* data = static_cast<const uint8_t*>(tensor.raw_data());
    bytes[name].assign(data, data + tensor.nbytes());
  }
  return bytes;
}

}  // namespace mg_test
