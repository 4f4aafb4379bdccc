// tests/optim/test_optimizers.cpp — SGD, Adam, AdamW and Adagrad against scalar reference
// implementations of PyTorch's published algorithms (three steps, float64, fixed
// gradients), and the optimizer contract: lazy OPTIMIZER_STATE, skipped parameters,
// zero_grad, set_lr, parameter groups and validation errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/optim/optim.h"

using namespace mg;
using Catch::Matchers::Contains;
using Values = std::vector<double>;

namespace {

const Values kStart = {0.5, -1.25, 2.0, 0.0, -0.75, 1.5};
// One gradient per step; signs and sizes vary so every term of each formula matters.
const std::vector<Values> kGrads = {{0.3, -0.8, 1.1, -0.05, 0.6, -1.4},
                                    {-0.2, 0.9, 0.4, 0.7, -0.35, -0.6},
                                    {0.15, -0.1, -1.3, 0.25, 0.8, 0.45}};

Tensor make_param(const Values& values = kStart) {
  Tensor param = from_vector(values, {2, 3}, {.category = MemoryCategory::Parameter});
  param.requires_grad_();
  return param;
}

void set_grad(const Tensor& param, const Values& values) {
  param.set_grad(from_vector(values, param.sizes(), {.category = MemoryCategory::Gradient}));
}

// Runs kGrads.size() steps and returns the parameter's values.
Values run_steps(optim::Optimizer& optimizer, const Tensor& param) {
  for (const Values& grad : kGrads) {
    set_grad(param, grad);
    optimizer.step();
  }
  return param.to_vector<double>();
}

void require_close(const Values& actual, const Values& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    REQUIRE_THAT(actual[i], Catch::Matchers::WithinAbs(expected[i], 1e-12));
  }
}

int64_t category_bytes(MemoryCategory category) {
  return allocator_for(Device::cpu()).stats().category(category).current;
}

// ---- references: torch.optim's documented algorithms, one element at a time ----

Values reference_sgd(const optim::SGDOptions& o) {
  Values param = kStart, buffer(param.size());
  for (size_t t = 0; t < kGrads.size(); ++t) {
    for (size_t i = 0; i < param.size(); ++i) {
      double g = kGrads[t][i] + o.weight_decay * param[i];
      if (o.momentum != 0) {
        buffer[i] = t == 0 ? g : o.momentum * buffer[i] + (1 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buffer[i] : buffer[i];
      }
      param[i] -= o.lr * g;
    }
  }
  return param;
}

Values reference_adam(const optim::AdamOptions& o, bool decoupled) {
  Values param = kStart, m(param.size()), v(param.size()), v_max(param.size());
  for (size_t t = 0; t < kGrads.size(); ++t) {
    int step = t + 1;
    for (size_t i = 0; i < param.size(); ++i) {
      double g = kGrads[t][i];
      if (decoupled) {
        param[i] -= o.lr * o.weight_decay * param[i];
      } else {
        g += o.weight_decay * param[i];
      }
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
      v_max[i] = std::max(v_max[i], v[i]);
      double m_hat = m[i] / (1 - std::pow(o.beta1, step));
      double v_hat = (o.amsgrad ? v_max[i] : v[i]) / (1 - std::pow(o.beta2, step));
      param[i] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
  }
  return param;
}

Values reference_adagrad(const optim::AdagradOptions& o) {
  Values param = kStart, sum(param.size(), o.initial_accumulator_value);
  for (size_t t = 0; t < kGrads.size(); ++t) {
    double clr = o.lr / (1 + t * o.lr_decay);
    for (size_t i = 0; i < param.size(); ++i) {
      double g = kGrads[t][i] + o.weight_decay * param[i];
      sum[i] += g * g;
      param[i] -= clr * g / (std::sqrt(sum[i]) + o.eps);
    }
  }
  return param;
}

}  // namespace

TEST_CASE("SGD matches PyTorch's algorithm", "[optim]") {
  auto options = GENERATE(optim::SGDOptions{.lr = 0.1},
                          optim::SGDOptions{.lr = 0.1, .momentum = 0.9},
                          optim::SGDOptions{.lr = 0.05, .momentum = 0.8, .dampening = 0.3},
                          optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true},
                          optim::SGDOptions{.lr = 0.1, .weight_decay = 0.2},
                          optim::SGDOptions{.lr = 0.1, .momentum = 0.7, .dampening = 0.1,
                                            .weight_decay = 0.05});
  INFO("momentum " << options.momentum << ", dampening " << options.dampening
                   << ", weight_decay " << options.weight_decay << ", nesterov " << options.nesterov);
  Tensor param = make_param();
  optim::SGD optimizer({param}, options);
  require_close(run_steps(optimizer, param), reference_sgd(options));
}

TEST_CASE("Adam matches PyTorch's algorithm", "[optim]") {
  auto options = GENERATE(optim::AdamOptions{.lr = 0.1},
                          optim::AdamOptions{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6,
                                             .weight_decay = 0.1},
                          optim::AdamOptions{.lr = 0.1, .amsgrad = true},
                          optim::AdamOptions{.lr = 0.1, .weight_decay = 0.3, .amsgrad = true});
  INFO("weight_decay " << options.weight_decay << ", amsgrad " << options.amsgrad);
  Tensor param = make_param();
  optim::Adam optimizer({param}, options);
  require_close(run_steps(optimizer, param), reference_adam(options, /*decoupled=*/false));
  REQUIRE(optimizer.state(param)->step.item<float>() == 3.0f);
}

TEST_CASE("AdamW matches PyTorch's algorithm", "[optim]") {
  auto options = GENERATE(optim::AdamWOptions{.lr = 0.1},
                          optim::AdamWOptions{.lr = 0.1, .weight_decay = 0.5, .amsgrad = true});
  REQUIRE(optim::AdamWOptions{}.weight_decay == 1e-2);
  Tensor param = make_param();
  optim::AdamW optimizer({param}, options);
  optim::AdamOptions as_adam{.lr = options.lr, .weight_decay = options.weight_decay,
                             .amsgrad = options.amsgrad};
  Values expected = reference_adam(as_adam, /*decoupled=*/true);
  require_close(run_steps(optimizer, param), expected);
  // Decoupled decay really differs from Adam's L2 decay.
  REQUIRE(std::abs(expected[2] - reference_adam(as_adam, false)[2]) > 1e-4);
}

TEST_CASE("Adagrad matches PyTorch's algorithm", "[optim]") {
  auto options = GENERATE(optim::AdagradOptions{.lr = 0.1},
                          optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.5,
                                                .initial_accumulator_value = 0.25},
                          optim::AdagradOptions{.lr = 0.2, .lr_decay = 0.1, .weight_decay = 0.1,
                                                .initial_accumulator_value = 1.0, .eps = 1e-6});
  INFO("lr_decay " << options.lr_decay << ", initial_accumulator_value "
                   << options.initial_accumulator_value);
  Tensor param = make_param();
  optim::Adagrad optimizer({param}, options);
  require_close(run_steps(optimizer, param), reference_adagrad(options));
}

TEST_CASE("state is created lazily and tagged OPTIMIZER_STATE", "[optim]") {
  int64_t before = category_bytes(MemoryCategory::OptimizerState);
  Tensor weight = make_param();  // 6 float64: 48 bytes
  Tensor bias = from_vector(std::vector<float>{1, 2, 3}, {}, {.category = MemoryCategory::Parameter});
  bias.requires_grad_();  // 3 float32: 12 bytes

  SECTION("Adam: two moments per parameter and a 4-byte step counter each") {
    optim::Adam optimizer({weight, bias});
    REQUIRE(optimizer.state_bytes() == 0);
    REQUIRE(category_bytes(MemoryCategory::OptimizerState) == before);
    REQUIRE(optimizer.state(weight) == nullptr);
    set_grad(weight, kGrads[0]);
    bias.set_grad(from_vector(std::vector<float>{0.1f, 0.2f, 0.3f}));
    optimizer.step();
    int64_t expected = 2 * 48 + 4 + 2 * 12 + 4;
    REQUIRE(optimizer.state_bytes() == expected);
    REQUIRE(category_bytes(MemoryCategory::OptimizerState) - before == expected);
    const optim::ParamState* state = optimizer.state(weight);
    REQUIRE(state != nullptr);
    REQUIRE(state->exp_avg.memory_category() == MemoryCategory::OptimizerState);
    REQUIRE(state->step.memory_category() == MemoryCategory::OptimizerState);
    REQUIRE(state->step.dtype() == DType::Float32);
    REQUIRE_FALSE(state->max_exp_avg_sq.defined());
    optimizer.step();  // a second step allocates nothing more
    REQUIRE(category_bytes(MemoryCategory::OptimizerState) - before == expected);
  }
  SECTION("SGD without momentum keeps no state") {
    optim::SGD optimizer({weight, bias});
    set_grad(weight, kGrads[0]);
    optimizer.step();
    REQUIRE(optimizer.state_bytes() == 0);
    REQUIRE(optimizer.state(weight) == nullptr);
    REQUIRE(category_bytes(MemoryCategory::OptimizerState) == before);
  }
  SECTION("SGD with momentum keeps one buffer") {
    optim::SGD optimizer({weight, bias}, {.momentum = 0.9});
    set_grad(weight, kGrads[0]);
    optimizer.step();
    REQUIRE(optimizer.state_bytes() == 48);
    REQUIRE(category_bytes(MemoryCategory::OptimizerState) - before == 48);
  }
  REQUIRE(category_bytes(MemoryCategory::OptimizerState) == before);  // freed with the optimizer
}

TEST_CASE("parameters without a gradient are skipped", "[optim]") {
  Tensor with_grad = make_param();
  Tensor without_grad = make_param();
  optim::Adam optimizer({with_grad, without_grad}, {.lr = 0.1});
  uint64_t untouched_version = without_grad.version();
  uint64_t updated_version = with_grad.version();
  set_grad(with_grad, kGrads[0]);
  optimizer.step();
  REQUIRE(without_grad.to_vector<double>() == kStart);
  REQUIRE(without_grad.version() == untouched_version);
  REQUIRE(optimizer.state(without_grad) == nullptr);
  REQUIRE(with_grad.to_vector<double>() != kStart);
  REQUIRE(with_grad.version() > updated_version);  // in-place writes are visible to autograd
}

TEST_CASE("zero_grad drops gradients by default and can zero them instead", "[optim]") {
  int64_t before = category_bytes(MemoryCategory::Gradient);
  Tensor param = make_param();
  optim::SGD optimizer({param});
  set_grad(param, kGrads[0]);
  REQUIRE(category_bytes(MemoryCategory::Gradient) - before == 48);

  SECTION("set to none: the GRADIENT bytes are freed") {
    optimizer.zero_grad();
    REQUIRE_FALSE(param.grad().defined());
    REQUIRE(category_bytes(MemoryCategory::Gradient) == before);
    optimizer.step();  // nothing to do
    REQUIRE(param.to_vector<double>() == kStart);
  }
  SECTION("set_to_none = false: zeros, same storage") {
    Tensor grad = param.grad();
    optimizer.zero_grad(/*set_to_none=*/false);
    REQUIRE(param.grad().is_same(grad));
    REQUIRE(grad.to_vector<double>() == Values(kStart.size(), 0.0));
    REQUIRE(category_bytes(MemoryCategory::Gradient) - before == 48);
  }
}

TEST_CASE("set_lr changes the next update", "[optim]") {
  Tensor param = make_param();
  optim::SGD optimizer({param}, {.lr = 0.1});
  REQUIRE(optimizer.lr() == 0.1);
  set_grad(param, kGrads[0]);
  optimizer.step();
  optimizer.set_lr(0.5);
  REQUIRE(optimizer.lr() == 0.5);
  REQUIRE(optimizer.param_groups()[0].lr == 0.5);
  set_grad(param, kGrads[1]);
  optimizer.step();
  Values expected = kStart;
  for (size_t i = 0; i < expected.size(); ++i) expected[i] -= 0.1 * kGrads[0][i] + 0.5 * kGrads[1][i];
  require_close(param.to_vector<double>(), expected);
  REQUIRE_THROWS_WITH(optimizer.set_lr(-1), Contains("Invalid learning rate: -1"));
}

TEST_CASE("each parameter group uses its own options", "[optim]") {
  Tensor first = make_param();
  Tensor second = make_param();
  optim::SGD optimizer({first}, {.lr = 0.1});
  optimizer.add_param_group({second}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  REQUIRE(optimizer.param_groups().size() == 2);
  for (const Values& grad : kGrads) {
    set_grad(first, grad);
    set_grad(second, grad);
    optimizer.step();
  }
  require_close(first.to_vector<double>(), reference_sgd({.lr = 0.1}));
  require_close(second.to_vector<double>(),
                reference_sgd({.lr = 0.1, .momentum = 0.9, .nesterov = true}));
  REQUIRE_THROWS_WITH(optimizer.add_param_group({first}, {}),
                      Contains("more than one parameter group"));
}

TEST_CASE("invalid parameters and options are refused with PyTorch's messages", "[optim]") {
  Tensor param = make_param();
  std::vector<Tensor> params{param};
  REQUIRE_THROWS_WITH(optim::SGD({}), Contains("optimizer got an empty parameter list"));
  REQUIRE_THROWS_WITH(optim::SGD(params, {.lr = -0.1}), Contains("Invalid learning rate: -0.1"));
  REQUIRE_THROWS_WITH(optim::SGD(params, {.momentum = -1}), Contains("Invalid momentum value: -1"));
  REQUIRE_THROWS_WITH(optim::SGD(params, {.weight_decay = -1}),
                      Contains("Invalid weight_decay value: -1"));
  REQUIRE_THROWS_WITH(optim::SGD(params, {.nesterov = true}),
                      Contains("Nesterov momentum requires a momentum and zero dampening"));
  REQUIRE_THROWS_WITH(optim::SGD(params, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                      Contains("Nesterov momentum requires a momentum and zero dampening"));
  REQUIRE_THROWS_WITH(optim::Adam(params, {.beta1 = 1.0}),
                      Contains("Invalid beta parameter at index 0: 1"));
  REQUIRE_THROWS_WITH(optim::AdamW(params, {.beta2 = -0.5}),
                      Contains("Invalid beta parameter at index 1: -0.5"));
  REQUIRE_THROWS_WITH(optim::Adam(params, {.eps = -1e-8}), Contains("Invalid epsilon value"));
  REQUIRE_THROWS_WITH(optim::Adagrad(params, {.lr_decay = -1}), Contains("Invalid lr_decay value: -1"));
  REQUIRE_THROWS_WITH(optim::Adagrad(params, {.initial_accumulator_value = -1}),
                      Contains("Invalid initial_accumulator_value value: -1"));

  Tensor frozen = from_vector(Values{1, 2, 3, 4}, {2, 2});
  REQUIRE_THROWS_WITH(optim::SGD({param, frozen}),
                      Contains("parameter 1 (shape [2, 2]) does not require grad"));
  Tensor integers = from_vector(std::vector<int64_t>{1, 2});
  REQUIRE_THROWS_WITH(optim::SGD({integers}), Contains("only floating-point tensors"));
  REQUIRE_THROWS_WITH(optim::SGD({param, Tensor()}), Contains("parameter 1 is an undefined Tensor"));
  REQUIRE_THROWS_WITH(optim::SGD({param, param}), Contains("more than one parameter group"));
}

TEST_CASE("step refuses a gradient that does not match its parameter", "[optim]") {
  Tensor param = make_param();
  optim::Adam optimizer({param});
  // set_grad would refuse this; write the autograd field directly, as a buggy op might.
  param.ensure_autograd_meta().grad = from_vector(Values{1, 2, 3});
  REQUIRE_THROWS_WITH(optimizer.step(), Contains("parameter 0 of group 0 is [2, 3] float64 on cpu") &&
                                            Contains("its gradient is [3] float64"));
  REQUIRE(param.to_vector<double>() == kStart);
}

TEST_CASE("step_skipping_if: a set flag leaves parameters, state and step counters alone", "[optim]") {
  const Tensor clear = zeros({}), set = full({}, 1.0);
  for (int kind = 0; kind < 3; ++kind) {
    Tensor param = make_param(), reference = make_param();
    std::unique_ptr<optim::Optimizer> optimizer, plain;
    if (kind == 0) {
      optimizer = std::make_unique<optim::SGD>(std::vector<Tensor>{param}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
      plain = std::make_unique<optim::SGD>(std::vector<Tensor>{reference}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    } else if (kind == 1) {
      optimizer = std::make_unique<optim::Adam>(std::vector<Tensor>{param}, optim::AdamOptions{.lr = 0.1});
      plain = std::make_unique<optim::Adam>(std::vector<Tensor>{reference}, optim::AdamOptions{.lr = 0.1});
    } else {
      optimizer = std::make_unique<optim::Adagrad>(std::vector<Tensor>{param}, optim::AdagradOptions{.lr = 0.1});
      plain = std::make_unique<optim::Adagrad>(std::vector<Tensor>{reference}, optim::AdagradOptions{.lr = 0.1});
    }
    INFO("optimizer " << kind);
    // Clear, set, clear: the skipped middle step leaves no trace, so two plain steps match.
    set_grad(param, kGrads[0]);
    optimizer->step_skipping_if(clear);
    const std::vector<double> after_first = param.to_vector<double>();
    const optim::ParamState state = *optimizer->state(param);
    const std::vector<double> first_state =
        (kind == 0 ? state.momentum_buffer : kind == 1 ? state.exp_avg : state.sum).to_vector<double>();
    set_grad(param, kGrads[1]);
    optimizer->step_skipping_if(set);
    CHECK(param.to_vector<double>() == after_first);
    CHECK((kind == 0 ? state.momentum_buffer : kind == 1 ? state.exp_avg : state.sum).to_vector<double>() ==
          first_state);
    if (kind > 0) CHECK(state.step.item<float>() == 1.0f);
    set_grad(param, kGrads[2]);
    optimizer->step_skipping_if(clear);
    for (int step : {0, 2}) {
      set_grad(reference, kGrads[step]);
      plain->step();
    }
    CHECK(param.to_vector<double>() == reference.to_vector<double>());
    // A plain step() after a skipping one does not skip.
    set_grad(param, kGrads[1]);
    optimizer->step_skipping_if(set);
    CHECK(param.to_vector<double>() == reference.to_vector<double>());
    optimizer->step();
    CHECK(param.to_vector<double>() != reference.to_vector<double>());
  }
  Tensor param = make_param();
  optim::SGD sgd({param});
  CHECK_THROWS_WITH(sgd.step_skipping_if(zeros({2})), Contains("one-element float32"));
  CHECK_THROWS_WITH(sgd.step_skipping_if(zeros({}, {.dtype = DType::Float64})), Contains("one-element float32"));
}

TEST_CASE("the fused updates read the learning rate on the device in place of lr where it is given",
          "[optim][graph-capture]") {
  // lr 0 in the hyper-parameters, 0.5 in the tensor: only the tensor can move the parameter.
  const Tensor rate = full({}, 0.5, {.dtype = DType::Float64});
  auto updated = [&](const std::function<void(const Tensor&, const Tensor&)>& step) {
    Tensor param = from_vector(Values{1.0, 2.0}, {2});
    const Tensor grad = from_vector(Values{1.0, -1.0}, {2});
    step(param, grad);
    return param.to_vector<double>();
  };
  const KernelTable& cpu = kernels(Device::cpu());
  CHECK(updated([&](const Tensor& p, const Tensor& g) {
          cpu.sgd_step({&p, 1}, {&g, 1}, {},
                       {.lr = 0, .momentum = 0, .dampening = 0, .weight_decay = 0, .nesterov = false,
                        .first_step = false, .lr_on_device = &rate});
        }) == Values{0.5, 2.5});
  // Adam's first step moves each parameter by lr (sign of the gradient, up to eps).
  const std::vector<double> adam = updated([&](const Tensor& p, const Tensor& g) {
    const Tensor m = zeros({2}, {.dtype = DType::Float64}), v = zeros({2}, {.dtype = DType::Float64}), step = zeros({});
    cpu.adam_step({&p, 1}, {&g, 1}, {&m, 1}, {&v, 1}, {}, {&step, 1},
                  {.lr = 0, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0,
                   .decoupled_weight_decay = false, .amsgrad = false, .lr_on_device = &rate});
  });
  CHECK(adam[0] == Approx(0.5));
  CHECK(adam[1] == Approx(2.5));
  const std::vector<double> adagrad = updated([&](const Tensor& p, const Tensor& g) {
    const Tensor sum = zeros({2}, {.dtype = DType::Float64}), step = zeros({});
    cpu.adagrad_step({&p, 1}, {&g, 1}, {&sum, 1}, {&step, 1},
                     {.lr = 0, .lr_decay = 0, .weight_decay = 0, .eps = 1e-10, .lr_on_device = &rate});
  });
  CHECK(adagrad[0] == Approx(0.5));
  CHECK(adagrad[1] == Approx(2.5));
}
