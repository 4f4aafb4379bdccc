// tests/autograd/anomaly_models.h — what the anomaly-mode tests share (CPU and CUDA): a
// layer that applies an op, inside a tiny model so that the op runs at a real module path
// ("block.act"), and the error of a backward under the guard.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/autograd/anomaly_mode.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/reduce.h"
#include "autograd/tensor_checks.h"
#include "memgrad/core/factory.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/sequential.h"

namespace mg_test {

using Op = std::function<mg::Tensor(const mg::Tensor&)>;

// A layer that applies `op`.
class Apply : public mg::nn::Module {
 public:
  explicit Apply(Op op) : Module("Apply"), op_(std::move(op)) {}
  mg::Tensor forward(const mg::Tensor& input) override { return op_(input); }

 private:
  Op op_;
};

// A Linear(4, 4) computing the identity, so that the next layer sees the input's values exactly.
inline std::shared_ptr<mg::nn::Linear> identity_linear() {
  auto linear = std::make_shared<mg::nn::Linear>(4, 4);
  mg::NoGradGuard no_grad;
  linear->weight.copy_(mg::from_vector<float>({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {4, 4}));
  linear->bias.zero_();
  return linear;
}

using NamedLayers = std::vector<std::pair<std::string, std::shared_ptr<mg::nn::Module>>>;

// Sequential{"block": Sequential{"linear": identity, "act": Apply(op), then `more`}}, on the
// CPU: the op's module path is "block.act".
inline std::shared_ptr<mg::nn::Sequential> model_around(const Op& op, const NamedLayers& more = {}) {
  auto block = std::make_shared<mg::nn::Sequential>();
  block->push_back("linear", identity_linear());
  block->push_back("act", std::make_shared<Apply>(op));
  for (const auto& [name, module] : more) block->push_back(name, module);
  auto model = std::make_shared<mg::nn::Sequential>();
  model->push_back("block", block);
  return model;
}

// The error of a backward of sum(model(input)) (seeded with `seed`) under anomaly mode, or
// "no error".
inline std::string anomaly_error(mg::nn::Module& model, const mg::Tensor& input, const mg::Tensor& seed = {}) {
  mg::autograd::DetectAnomalyGuard detect_anomaly;
  const mg::Tensor loss = model(input).sum();  // NaN or Inf in forward is no error
  return error_message([&] { loss.backward(seed); });
}

}  // namespace mg_test
