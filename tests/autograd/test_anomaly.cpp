// tests/autograd/test_anomaly.cpp — anomaly mode: the first NaN or Inf gradient of a
// backward throws an error naming the backward node, the input whose gradient it is (index,
// shape, dtype, device), the forward op, the module path and, under a memory Recorder, the
// step: log and sqrt at 0, a division by zero, a log of a negative number (a NaN made in
// forward, caught where it first reaches a gradient) and a float16 gradient that overflows.
// Off, nothing is checked and the gradients are bit for bit those of a run with the guard
// on; guards nest and restore; a hidden case times what the mode costs (docs/debugging.md).
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/autograd/anomaly_mode.h"
#include "autograd/anomaly_models.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/context.h"
#include "memgrad/memory/recorder.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/sequential.h"

using namespace mg;
using autograd::DetectAnomalyGuard;
using autograd::is_anomaly_enabled;
using mg_test::anomaly_error;
using mg_test::error_message;
using mg_test::model_around;
using mg_test::Op;

namespace {

Tensor row(const std::vector<float>& values) { return from_vector<float>(values, {1, 4}); }

// The parameters' gradients after a backward of sum(model(input)), each cleared after.
std::vector<Tensor> gradients(nn::Module& model, const Tensor& input) {
  model(input).sum().backward();
  std::vector<Tensor> grads;
  for (const Tensor& parameter : model.parameters()) grads.push_back(parameter.grad());
  model.zero_grad();
  return grads;
}

}  // namespace

TEST_CASE("anomaly mode names the node, input, forward op and module of an Inf gradient", "[anomaly]") {
  struct Case {
    const char* what;
    Op op;
    std::vector<float> input;
    const char* node;
    const char* forward_op;
  };
  const std::vector<Case> cases = {
      {"log at 0: d/dx = 1/x", [](const Tensor& x) { return log(x); }, {1, 0, 2, 3}, "LogBackward", "Log"},
      {"sqrt at 0: d/dx = 1/(2 sqrt x)", [](const Tensor& x) { return sqrt(x); }, {4, 0, 1, 9}, "SqrtBackward",
       "Sqrt"},
      {"division by zero: d(a/b)/da = 1/b", [](const Tensor& x) { return x / (x - 2.0); }, {1, 2, 3, 4},
       "DivBackward", "Div"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    std::shared_ptr<nn::Sequential> model = model_around(c.op);
    const std::string message = anomaly_error(*model, row(c.input));
    CHECK_THAT(message, Catch::StartsWith(std::string("anomaly detected: ") + c.node +
                                          " returned a gradient with Inf values for input 0 of its forward op "
                                          "(shape [1, 4], float32, cpu)."));
    CHECK_THAT(message, Catch::Contains(std::string("recorded in forward by the op ") + c.forward_op +
                                        " in module block.act."));
    CHECK_THAT(message, Catch::Contains("Hint: an Inf gradient comes from an op taken where its derivative is "
                                        "infinite"));
    // The error stops the backward there: nothing reached the parameters.
    for (const Tensor& parameter : model->parameters()) CHECK_FALSE(parameter.grad().defined());
  }
}

TEST_CASE("anomaly mode: a log of a negative number is caught where its NaN first reaches a gradient", "[anomaly]") {
  // log(-1) is NaN in forward (no error, as in PyTorch); log's own gradient there is 1/x,
  // finite. The head's weight gradient, input^T @ grad, is the first to hold the NaN.
  std::shared_ptr<nn::Sequential> model =
      model_around([](const Tensor& x) { return log(x); }, {{"head", std::make_shared<nn::Linear>(4, 1)}});
  DetectAnomalyGuard detect_anomaly;
  const Tensor loss = (*model)(row({1, -1, 2, 3})).sum();
  CHECK(std::isnan(loss.item<double>()));
  const std::string message = error_message([&] { loss.backward(); });
  CHECK_THAT(message, Catch::StartsWith("anomaly detected: LinearBackward returned a gradient with NaN values for "
                                        "input 1 of its forward op (shape [1, 4], float32, cpu)."));
  CHECK_THAT(message, Catch::Contains("recorded in forward by the op Linear in module block.head."));
  CHECK_THAT(message, Catch::Contains("a NaN in the values the node saved in forward (log or sqrt of a negative "
                                      "number"));
}

TEST_CASE("anomaly mode catches a float16 gradient that overflows", "[anomaly]") {
  // x * x = 40000 fits float16 (largest 65504); its gradient, seed * x = 512 * 200, does not.
  std::shared_ptr<nn::Sequential> model = model_around([](const Tensor& x) { return x * x; });
  model->to(DType::Float16);
  const Tensor input = row({200, 1, 2, 3}).to(DType::Float16);
  const std::string message = anomaly_error(*model, input, scalar_tensor(512, {.dtype = DType::Float16}));
  CHECK_THAT(message, Catch::StartsWith("anomaly detected: MulBackward returned a gradient with Inf values for input 0 "
                                        "of its forward op (shape [1, 4], float16, cpu)."));
  CHECK_THAT(message, Catch::Contains("recorded in forward by the op Mul in module block.act."));
  CHECK_THAT(message, Catch::Contains("float16 ends at 65504"));
}

TEST_CASE("anomaly mode names the running memory Recorder's step and an enclosing op scope", "[anomaly]") {
  std::shared_ptr<nn::Sequential> model = model_around([](const Tensor& x) {
    memory::OpScope scope("safe_log");
    return log(x);
  });
  memory::Recorder recorder;
  recorder.start();
  recorder.next_step();
  recorder.next_step();
  const std::string message = anomaly_error(*model, row({1, 0, 2, 3}));
  recorder.stop();
  CHECK_THAT(message, Catch::Contains("by the op Log inside safe_log in module block.act, at step 2 of the running "
                                     "memory::Recorder."));
}

TEST_CASE("anomaly mode on for backward only says the node's origin is unknown", "[anomaly]") {
  std::shared_ptr<nn::Sequential> model = model_around([](const Tensor& x) { return log(x); });
  const Tensor loss = (*model)(row({1, 0, 2, 3})).sum();
  DetectAnomalyGuard detect_anomaly;
  const std::string message = error_message([&] { loss.backward(); });
  CHECK_THAT(message, Catch::StartsWith("anomaly detected: LogBackward returned a gradient with Inf values"));
  CHECK_THAT(message, Catch::Contains("recorded while anomaly mode was off"));
}

TEST_CASE("anomaly mode off checks nothing, and on changes no gradient", "[anomaly]") {
  SECTION("off, an Inf gradient flows to the parameters without an error") {
    std::shared_ptr<nn::Sequential> model = model_around([](const Tensor& x) { return log(x); });
    CHECK_FALSE(is_anomaly_enabled());
    const std::vector<Tensor> grads = gradients(*model, row({1, 0, 2, 3}));
    CHECK(std::isinf(grads[1].to_vector<float>()[1]));  // the bias's gradient at the 0
  }
  SECTION("finite gradients are the same bits with and without the guard") {
    Generator generator(5);
    auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(8, 16, true, &generator),
                                                  std::make_shared<nn::ReLU>(),
                                                  std::make_shared<nn::Linear>(16, 3, true, &generator));
    const Tensor input = randn({5, 8}, {}, &generator);
    const std::vector<Tensor> plain = gradients(*model, input);
    std::vector<Tensor> checked;
    {
      DetectAnomalyGuard detect_anomaly;
      checked = gradients(*model, input);
    }
    REQUIRE(plain.size() == checked.size());
    for (size_t i = 0; i < plain.size(); ++i) CHECK(mg_test::max_abs_difference(plain[i], checked[i]) == 0.0);
  }
}

TEST_CASE("anomaly guards nest and restore the setting, and the memory context is let go", "[anomaly]") {
  CHECK_FALSE(is_anomaly_enabled());
  CHECK_FALSE(memory::detail::tracking());
  {
    DetectAnomalyGuard outer;
    CHECK(is_anomaly_enabled());
    CHECK(memory::detail::tracking());
    {
      DetectAnomalyGuard inner(false);
      CHECK_FALSE(is_anomaly_enabled());
      CHECK_FALSE(memory::detail::tracking());
      {
        DetectAnomalyGuard again;
        CHECK(is_anomaly_enabled());
      }
      CHECK_FALSE(is_anomaly_enabled());
      // Off inside on: this backward is not checked.
      std::shared_ptr<nn::Sequential> model = model_around([](const Tensor& x) { return log(x); });
      CHECK_NOTHROW((*model)(row({1, 0, 2, 3})).sum().backward());
    }
    CHECK(is_anomaly_enabled());
    {
      DetectAnomalyGuard same;  // on inside on
      CHECK(is_anomaly_enabled());
    }
    CHECK(is_anomaly_enabled());
  }
  CHECK_FALSE(is_anomaly_enabled());
  CHECK_FALSE(memory::detail::tracking());
}

// Hidden (run by name): the figures of docs/debugging.md's cost table. Off and on take
// turns, round by round, so that a machine busy with other work slows both alike; each
// figure is the best round's mean.
TEST_CASE("anomaly mode's cost on a small MLP and per node", "[.][anomaly-cost]") {
  using Clock = std::chrono::steady_clock;
  auto microseconds = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::micro>(to - from).count();
  };
  constexpr int kRounds = 30;

  // A 784-512-256-10 MLP at batch 64, float32: forward and backward timed apart.
  Generator generator(1);
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(784, 512, true, &generator), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(512, 256, true, &generator), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 10, true, &generator));
  const Tensor input = randn({64, 784}, {}, &generator);
  struct StepTimes {
    double forward = 1e18, backward = 1e18;
  };
  StepTimes best[2];  // [anomaly off, on]
  for (int round = 0; round < kRounds; ++round) {
    for (int anomaly = 0; anomaly < 2; ++anomaly) {
      DetectAnomalyGuard detect_anomaly(anomaly == 1);
      constexpr int kSteps = 10;
      double forward = 0, backward = 0;
      for (int step = 0; step < kSteps; ++step) {
        const Clock::time_point start = Clock::now();
        const Tensor loss = (*model)(input).sum();
        const Clock::time_point middle = Clock::now();
        loss.backward();
        const Clock::time_point end = Clock::now();
        model->zero_grad();
        forward += microseconds(start, middle) / kSteps;
        backward += microseconds(middle, end) / kSteps;
      }
      best[anomaly].forward = std::min(best[anomaly].forward, forward);
      best[anomaly].backward = std::min(best[anomaly].backward, backward);
    }
  }
  std::printf("MLP 784-512-256-10, batch 64: forward %.0f -> %.0f us, backward %.0f -> %.0f us (%.2fx)\n",
              best[0].forward, best[1].forward, best[0].backward, best[1].backward,
              best[1].backward / best[0].backward);

  // Per node: the backward of a chain of 10,000 one-element ops, where the engine's own work
  // is all there is.
  constexpr int kNodes = 10000;
  double best_per_node[2] = {1e18, 1e18};
  for (int round = 0; round < kRounds; ++round) {
    for (int anomaly = 0; anomaly < 2; ++anomaly) {
      DetectAnomalyGuard detect_anomaly(anomaly == 1);
      Tensor x = scalar_tensor(1.0).requires_grad_();
      Tensor y = x;
      for (int i = 0; i < kNodes; ++i) y = y * 1.0;
      const Clock::time_point start = Clock::now();
      y.backward();
      best_per_node[anomaly] = std::min(best_per_node[anomaly], 1000 * microseconds(start, Clock::now()) / kNodes);
      CHECK(x.grad().item<double>() == 1.0);
    }
  }
  std::printf("chain of one-element ops: backward %.0f -> %.0f ns per node\n", best_per_node[0], best_per_node[1]);
}
