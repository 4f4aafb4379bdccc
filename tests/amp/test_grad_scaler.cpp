// tests/amp/test_grad_scaler.cpp — GradScaler on the CPU: scaled steps match unscaled ones,
// an overflow skips the step (parameters, state and step counters untouched) and halves the
// scale, growth after growth_interval clean steps, misuse refused with clear errors, and
// checkpoints that carry the scale. The device-independent checks live in
// grad_scaler_checks.h; tests/cuda/test_cuda_grad_scaler.cpp runs them on a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "memgrad/amp/grad_scaler.h"
#include "amp/grad_scaler_checks.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "data/mnist_test_files.h"
#include "memgrad/optim/optim.h"

using namespace mg;
using Catch::Matchers::Contains;
using mg_test::loss_of;
using mg_test::make_params;
using mg_test::scaled_backward;

TEST_CASE("GradScaler: scaled steps match unscaled ones (SGD, Adam, Adagrad)", "[amp]") {
  mg_test::check_scaled_steps_match_plain_steps(Device::cpu());
}

TEST_CASE("GradScaler: an inf or NaN gradient skips the step and halves the scale", "[amp]") {
  mg_test::check_overflow_skips_the_step(Device::cpu());
}

TEST_CASE("GradScaler: the scale grows after growth_interval clean steps", "[amp]") {
  mg_test::check_scale_growth(Device::cpu());
}

TEST_CASE("GradScaler: scale() multiplies the loss and unscale_ divides the gradients", "[amp]") {
  std::vector<Tensor> params = make_params(Device::cpu());
  optim::SGD optimizer(params, {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 8.0});
  CHECK(scaler.get_scale() == 8.0);  // before the first scale(): the initial value
  const Tensor loss = loss_of(params, 0);
  const Tensor scaled = scaler.scale(loss);
  CHECK(scaled.item<float>() == loss.item<float>() * 8.0f);
  scaled.backward();
  const std::vector<float> scaled_grad = params[1].grad().to_vector<float>();
  scaler.unscale_(optimizer);
  const std::vector<float> grad = params[1].grad().to_vector<float>();
  for (size_t i = 0; i < grad.size(); ++i) CHECK(grad[i] == scaled_grad[i] / 8.0f);
}

TEST_CASE("GradScaler: float16 and float32 gradients of one optimizer are unscaled and checked", "[amp]") {
  Tensor half_param = full({300}, 1.0, {.dtype = DType::Float16});
  Tensor float_param = full({7}, 1.0);
  half_param.requires_grad_();
  float_param.requires_grad_();
  optim::SGD optimizer({half_param, float_param}, {.lr = 1.0});
  amp::GradScaler scaler({.init_scale = 4.0});
  scaler.scale(float_param.sum()).backward();  // places the scale; float_param's grad = 4
  half_param.set_grad(full({300}, 8.0, {.dtype = DType::Float16}));
  scaler.step(optimizer);
  CHECK(half_param.to(DType::Float32).to_vector<float>() == std::vector<float>(300, -1.0f));  // 1 - 8 / 4
  CHECK(float_param.to_vector<float>() == std::vector<float>(7, 0.0f));                    // 1 - 4 / 4
  scaler.update();

  // An inf in the float16 list alone skips the float32 parameter's update too.
  optimizer.zero_grad();
  scaler.scale(float_param.sum()).backward();
  Tensor half_grad = full({300}, 8.0, {.dtype = DType::Float16});
  half_grad.narrow(0, 299, 1).fill_(std::numeric_limits<double>::infinity());
  half_param.set_grad(half_grad);
  scaler.step(optimizer);
  CHECK(half_param.to(DType::Float32).to_vector<float>() == std::vector<float>(300, -1.0f));
  CHECK(float_param.to_vector<float>() == std::vector<float>(7, 0.0f));
  scaler.update();
  CHECK(scaler.get_scale() == 2.0);
}

TEST_CASE("GradScaler: misuse is refused with a clear error", "[amp]") {
  std::vector<Tensor> params = make_params(Device::cpu());
  optim::Adam optimizer(params);
  amp::GradScaler scaler;
  CHECK_THROWS_WITH(scaler.unscale_(optimizer), Contains("before any scale(loss)"));
  CHECK_THROWS_WITH(scaler.update(), Contains("before any scale(loss)"));

  scaled_backward(scaler, params, 0);
  CHECK_THROWS_WITH(scaler.update(), Contains("no inf checks were recorded"));
  scaler.unscale_(optimizer);
  CHECK_THROWS_AS(scaler.unscale_(optimizer), Error);
  CHECK_THROWS_WITH(scaler.unscale_(optimizer),
                    Contains("unscale_() has already been called on this optimizer since the last update()"));
  scaler.step(optimizer);
  CHECK_THROWS_WITH(scaler.step(optimizer), Contains("step() has already been called"));
  CHECK_THROWS_WITH(scaler.unscale_(optimizer), Contains("after step()"));
  scaler.update();

  // After update() a new iteration may unscale and step again.
  optimizer.zero_grad();
  scaled_backward(scaler, params, 1);
  scaler.unscale_(optimizer);
  scaler.step(optimizer);
  scaler.update();

  CHECK_THROWS_WITH(scaler.scale(Tensor()), Contains("expected a floating-point tensor"));
  CHECK_THROWS_WITH(amp::GradScaler({.growth_factor = 1.0}), Contains("growth factor must be > 1.0"));
  CHECK_THROWS_WITH(amp::GradScaler({.backoff_factor = 1.0}), Contains("backoff factor"));
  CHECK_THROWS_WITH(amp::GradScaler({.growth_interval = 0}), Contains("growth_interval"));
  CHECK_THROWS_WITH(amp::GradScaler({.init_scale = -1}), Contains("init_scale"));
  CHECK_THROWS_WITH(scaler.update(0.0), Contains("positive finite"));
}

TEST_CASE("GradScaler: update(new_scale) sets the scale", "[amp]") {
  std::vector<Tensor> params = make_params(Device::cpu());
  optim::SGD optimizer(params, {.lr = 0.01});
  amp::GradScaler scaler({.growth_interval = 5});
  scaled_backward(scaler, params, 0);
  scaler.step(optimizer);
  scaler.update(128.0);
  CHECK(scaler.get_scale() == 128.0);
  CHECK(scaler.get_growth_tracker() == 0);  // update(new_scale) counts nothing
  optimizer.zero_grad();
  scaled_backward(scaler, params, 1);
  scaler.step(optimizer);  // the previous step's record was cleared
  scaler.update();
  CHECK(scaler.get_growth_tracker() == 1);
}

TEST_CASE("GradScaler: disabled, every call passes through", "[amp]") {
  std::vector<Tensor> plain_params = make_params(Device::cpu()), scaled_params = make_params(Device::cpu());
  optim::Adam plain(plain_params), scaled(scaled_params);
  amp::GradScaler scaler({.enabled = false});
  for (int step = 0; step < 2; ++step) {
    loss_of(plain_params, step).backward();
    plain.step();
    const Tensor loss = loss_of(scaled_params, step);
    const Tensor passed = scaler.scale(loss);
    CHECK(passed.is_same(loss));
    passed.backward();
    scaler.unscale_(scaled);
    scaler.step(scaled);
    scaler.update();
  }
  CHECK(mg_test::snapshot(scaled) == mg_test::snapshot(plain));
  CHECK(scaler.get_scale() == 1.0);
  CHECK(scaler.state_dict().empty());
}

namespace {

// Plain gradient descent through tensor ops: an optimizer without a fused kernel, so
// step_skipping_if() reads the flag on the host.
class TensorOpsDescent : public optim::Optimizer {
 public:
  explicit TensorOpsDescent(std::vector<Tensor> params) { add_group(std::move(params), 0.5); }
  void step() override {
    NoGradGuard no_grad;
    for (const Tensor& param : param_groups()[0].params) {
      if (param.grad().defined()) param.sub_(param.grad() * lr());
    }
  }
};

}  // namespace

TEST_CASE("GradScaler: an optimizer without a device-side skip is skipped from the host", "[amp]") {
  std::vector<Tensor> params = make_params(Device::cpu());
  TensorOpsDescent optimizer(params);
  amp::GradScaler scaler;
  scaled_backward(scaler, params, 0);
  mg_test::poison_gradient(params, std::numeric_limits<float>::infinity());
  const auto before = mg_test::snapshot(optimizer);
  scaler.step(optimizer);
  scaler.update();
  CHECK(mg_test::snapshot(optimizer) == before);
  CHECK(scaler.get_scale() == 32768.0);

  optimizer.zero_grad();
  scaled_backward(scaler, params, 1);
  scaler.step(optimizer);
  scaler.update();
  CHECK(mg_test::snapshot(optimizer) != before);
}

TEST_CASE("GradScaler: its scale and growth tracker travel in the optimizer checkpoint", "[amp][checkpoint]") {
  mg_test::TempDir dir("grad-scaler");
  const std::string path = dir.file("optimizer.safetensors");
  const amp::GradScalerOptions options{.init_scale = 1024, .growth_interval = 5};

  // A run: two clean steps, an overflow, two clean steps -> scale 512, tracker 2.
  std::vector<Tensor> params = make_params(Device::cpu());
  optim::Adam optimizer(params, {.lr = 0.01});
  amp::GradScaler scaler(options);
  for (int step = 0; step < 5; ++step) {
    optimizer.zero_grad();
    scaled_backward(scaler, params, step);
    if (step == 2) mg_test::poison_gradient(params, std::numeric_limits<float>::infinity());
    scaler.step(optimizer);
    scaler.update();
  }
  REQUIRE(scaler.get_scale() == 512.0);
  REQUIRE(scaler.get_growth_tracker() == 2);
  amp::save(optimizer, scaler, path, {{"epoch", "3"}});

  // Restored into a fresh optimizer and scaler (before its first scale()), both continue
  // exactly as the original.
  std::vector<Tensor> resumed_params = make_params(Device::cpu());
  for (size_t i = 0; i < params.size(); ++i) {
    NoGradGuard no_grad;
    resumed_params[i].copy_(params[i]);
  }
  optim::Adam resumed(resumed_params, {.lr = 0.01});
  amp::GradScaler resumed_scaler(options);
  amp::load(resumed, resumed_scaler, path);
  CHECK(resumed_scaler.get_scale() == 512.0);
  CHECK(resumed_scaler.get_growth_tracker() == 2);
  CHECK(mg_test::snapshot(resumed) == mg_test::snapshot(optimizer));
  for (int step = 5; step < 9; ++step) {
    for (auto [run_params, run_optimizer, run_scaler] :
         {std::tuple{&params, &optimizer, &scaler}, std::tuple{&resumed_params, &resumed, &resumed_scaler}}) {
      run_optimizer->zero_grad();
      scaled_backward(*run_scaler, *run_params, step);
      run_scaler->step(*run_optimizer);
      run_scaler->update();
    }
  }
  CHECK(resumed_scaler.get_scale() == 1024.0);  // grew at the 5th clean step in both runs
  CHECK(resumed_scaler.get_scale() == scaler.get_scale());
  CHECK(resumed_scaler.get_growth_tracker() == scaler.get_growth_tracker());
  CHECK(mg_test::snapshot(resumed) == mg_test::snapshot(optimizer));

  // A scaler already in use takes the saved values on its device tensors.
  amp::load(resumed, resumed_scaler, path);
  CHECK(resumed_scaler.get_scale() == 512.0);
  CHECK(resumed_scaler.get_growth_tracker() == 2);

  // Refusals change neither the optimizer nor the scaler.
  amp::GradScaler other_options({.init_scale = 1024, .growth_interval = 7});
  const auto state_before = mg_test::snapshot(resumed);
  CHECK_THROWS_WITH(amp::load(resumed, other_options, path), Contains("growth_interval = 5"));
  CHECK(mg_test::snapshot(resumed) == state_before);
  CHECK(other_options.get_scale() == 1024.0);
  CHECK_THROWS_WITH(optim::load(resumed, path), Contains("amp::load"));

  const std::string plain_path = dir.file("plain.safetensors");
  optim::save(optimizer, plain_path);
  amp::GradScaler fresh(options);
  CHECK_THROWS_WITH(amp::load(resumed, fresh, plain_path), Contains("\"scaler.scale\" is missing"));
  CHECK(fresh.get_scale() == 1024.0);

  // In memory: state_dict / load_state_dict, with the options checked.
  amp::GradScaler copy(options);
  copy.load_state_dict(scaler.state_dict());
  CHECK(copy.get_scale() == scaler.get_scale());
  amp::NamedTensors wrong = scaler.state_dict();
  wrong.emplace_back("scaler.extra", scalar_tensor(1.0, {.dtype = DType::Float64}));
  CHECK_THROWS_WITH(copy.load_state_dict(wrong), Contains("\"scaler.extra\" is not part"));
}
