// tests/amp/grad_scaler_checks.h — GradScaler checks that run on any device: the CPU tests
// (tests/amp/test_grad_scaler.cpp) and the CUDA tests (tests/cuda/test_cuda_grad_scaler.cpp)
// call them with their device, so both backends are held to the same expectations.
//
// The reference is the same optimizer without a scaler: scaling by a power of two and
// unscaling by its inverse are exact in floating point, so a scaled run must match an
// unscaled one to rounding.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/amp/grad_scaler.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/core/tensor.h"
#include "memgrad/optim/optim.h"

namespace mg_test {

using mg::Device;
using mg::Tensor;

// A weight (3, 4) and bias (4), the same values every call (a fixed seed), on `device`.
inline std::vector<Tensor> make_params(Device device) {
  mg::Generator generator(11);
  Tensor weight = mg::randn({3, 4}, {}, &generator).to(device);
  Tensor bias = mg::randn({4}, {}, &generator).to(device);
  weight.requires_grad_();
  bias.requires_grad_();
  return {weight, bias};
}

// mean((x @ weight + bias)^2) for a batch that depends only on `step`.
inline Tensor loss_of(const std::vector<Tensor>& params, int step) {
  mg::Generator generator(100 + step);
  const Tensor inputs = mg::randn({6, 3}, {}, &generator).to(params[0].device());
  const Tensor outputs = inputs.matmul(params[0]) + params[1];
  return (outputs * outputs).mean();
}

using MakeOptimizer = std::function<std::unique_ptr<mg::optim::Optimizer>(const std::vector<Tensor>&)>;

struct OptimizerCase {
  std::string name;
  MakeOptimizer make;
};

// SGD with Nesterov momentum, Adam with amsgrad (all three moments and a step counter) and
// Adagrad (a sum and a step counter): every state entry a skipped step must leave alone.
inline std::vector<OptimizerCase> optimizer_cases() {
  using namespace mg::optim;
  return {
      {"SGD", [](const std::vector<Tensor>& params) -> std::unique_ptr<Optimizer> {
         return std::make_unique<SGD>(params, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3,
                                                         .nesterov = true});
       }},
      {"Adam", [](const std::vector<Tensor>& params) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Adam>(params, AdamOptions{.lr = 0.01, .weight_decay = 1e-4, .amsgrad = true});
       }},
      {"Adagrad", [](const std::vector<Tensor>& params) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Adagrad>(params, AdagradOptions{.lr = 0.1});
       }},
  };
}

inline std::vector<float> host_values(const Tensor& tensor) {
  return tensor.detach().to(Device::cpu()).to(mg::DType::Float32).to_vector<float>();
}

// Every parameter and every state tensor (step counters included), in a fixed order.
inline std::vector<std::vector<float>> snapshot(const mg::optim::Optimizer& optimizer) {
  std::vector<std::vector<float>> values;
  for (const Tensor& param : optimizer.all_params()) {
    values.push_back(host_values(param));
    const mg::optim::ParamState* state = optimizer.state(param);
    if (state == nullptr) continue;
    for (const Tensor* entry : {&state->step, &state->momentum_buffer, &state->exp_avg, &state->exp_avg_sq,
                                &state->max_exp_avg_sq, &state->sum}) {
      if (entry->defined()) values.push_back(host_values(*entry));
    }
  }
  return values;
}

inline void check_close(const std::vector<std::vector<float>>& actual, const std::vector<std::vector<float>>& expected,
                        const std::string& what) {
  INFO(what);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    REQUIRE(actual[i].size() == expected[i].size());
    for (size_t j = 0; j < actual[i].size(); ++j) {
      INFO("tensor " << i << " element " << j);
      CHECK(actual[i][j] == Approx(expected[i][j]).epsilon(1e-6).margin(1e-7));
    }
  }
}

// One scaled backward of step `step`'s loss.
inline void scaled_backward(mg::amp::GradScaler& scaler, const std::vector<Tensor>& params, int step) {
  scaler.scale(loss_of(params, step)).backward();
}

// Puts `value` (inf or NaN) into one element of the first parameter's gradient.
inline void poison_gradient(const std::vector<Tensor>& params, float value) {
  params[0].grad().view({-1}).narrow(0, 5, 1).fill_(value);
}

// Three scaled steps end where three plain steps do, for every optimizer; unscale_ before
// step() gives the true gradients, and step() then does not unscale them again.
inline void check_scaled_steps_match_plain_steps(Device device) {
  for (const OptimizerCase& kind : optimizer_cases()) {
    INFO(kind.name << " on " << device);
    std::vector<Tensor> plain_params = make_params(device), scaled_params = make_params(device);
    auto plain = kind.make(plain_params);
    auto scaled = kind.make(scaled_params);
    mg::amp::GradScaler scaler;
    for (int step = 0; step < 3; ++step) {
      plain->zero_grad();
      loss_of(plain_params, step).backward();
      plain->step();

      scaled->zero_grad();
      scaled_backward(scaler, scaled_params, step);
      if (step == 1) {
        scaler.unscale_(*scaled);
        for (size_t i = 0; i < plain_params.size(); ++i) {
          check_close({host_values(scaled_params[i].grad())}, {host_values(plain_params[i].grad())},
                      "gradients after unscale_");
        }
      }
      scaler.step(*scaled);
      scaler.update();
    }
    check_close(snapshot(*scaled), snapshot(*plain), "parameters and state after three steps");
    CHECK(scaler.get_scale() == 65536.0);
    CHECK(scaler.get_growth_tracker() == 3);
  }
}

// A gradient with an inf or NaN: step() changes nothing (parameters, state, step counters)
// and update() halves the scale and resets the tracker; the next clean step updates again.
inline void check_overflow_skips_the_step(Device device) {
  for (const OptimizerCase& kind : optimizer_cases()) {
    for (float poison : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      INFO(kind.name << " on " << device << " with a " << poison << " gradient");
      std::vector<Tensor> params = make_params(device);
      auto optimizer = kind.make(params);
      mg::amp::GradScaler scaler;
      scaled_backward(scaler, params, 0);  // a clean step first, so that state exists
      scaler.step(*optimizer);
      scaler.update();
      const auto before = snapshot(*optimizer);

      optimizer->zero_grad();
      scaled_backward(scaler, params, 1);
      poison_gradient(params, poison);
      scaler.step(*optimizer);
      CHECK(snapshot(*optimizer) == before);  // bit for bit
      scaler.update();
      CHECK(scaler.get_scale() == 32768.0);
      CHECK(scaler.get_growth_tracker() == 0);

      optimizer->zero_grad();
      scaled_backward(scaler, params, 2);
      scaler.step(*optimizer);
      scaler.update();
      CHECK(snapshot(*optimizer)[0] != before[0]);
      CHECK(scaler.get_growth_tracker() == 1);
      const mg::optim::ParamState* state = optimizer->state(params[0]);
      REQUIRE(state != nullptr);
      if (state->step.defined()) CHECK(state->step.to(Device::cpu()).item<float>() == 2.0f);
    }
  }
}

// growth_interval clean steps double the scale; an overflow in between starts the count anew.
inline void check_scale_growth(Device device) {
  std::vector<Tensor> params = make_params(device);
  mg::optim::SGD optimizer(params, {.lr = 0.01});
  mg::amp::GradScaler scaler({.init_scale = 1024, .growth_interval = 3});
  auto clean_step = [&](int step) {
    optimizer.zero_grad();
    scaled_backward(scaler, params, step);
    scaler.step(optimizer);
    scaler.update();
  };
  clean_step(0);
  clean_step(1);
  CHECK(scaler.get_scale() == 1024.0);
  CHECK(scaler.get_growth_tracker() == 2);
  clean_step(2);
  CHECK(scaler.get_scale() == 2048.0);
  CHECK(scaler.get_growth_tracker() == 0);

  clean_step(3);
  clean_step(4);
  optimizer.zero_grad();
  scaled_backward(scaler, params, 5);
  poison_gradient(params, std::numeric_limits<float>::infinity());
  scaler.step(optimizer);
  scaler.update();
  CHECK(scaler.get_scale() == 1024.0);
  CHECK(scaler.get_growth_tracker() == 0);
  for (int step = 6; step < 9; ++step) clean_step(step);
  CHECK(scaler.get_scale() == 2048.0);

  // A scale that would overflow float32 stays where it is: 2^127 does not grow to inf. (A
  // tiny loss keeps the scaled loss and its gradients finite at that scale.)
  mg::amp::GradScaler at_the_top({.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  optimizer.zero_grad();
  at_the_top.scale(loss_of(params, 9) * 1e-6).backward();
  at_the_top.step(optimizer);
  at_the_top.update();
  CHECK(at_the_top.get_scale() == std::ldexp(1.0, 127));
  CHECK(at_the_top.get_growth_tracker() == 0);
}

}  // namespace mg_test
