// tests/nn/test_functional.cpp — nn::Functional: a lambda as a module in a Sequential that
// trains (the loss must fall below a stated bar), printed with its name, labelled by its
// place in the container for the memory Recorder, owning no parameters, and refusing an
// empty function.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/memory/recorder.h"
#include "memgrad/nn/functional.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/sequential.h"
#include "memgrad/optim/adam.h"

using Catch::Matchers::Contains;

namespace {

// relu(x) * x: a step with no layer of its own.
std::shared_ptr<mg::nn::Sequential> model_with_a_lambda() {
  mg::manual_seed(37);
  return std::make_shared<mg::nn::Sequential>(
      std::make_shared<mg::nn::Linear>(2, 16),
      std::make_shared<mg::nn::Functional>([](const mg::Tensor& x) { return mg::relu(x) * x; }, "relu_times_x"),
      std::make_shared<mg::nn::Linear>(16, 1));
}

}  // namespace

TEST_CASE("Functional: a lambda in a Sequential that trains", "[nn][functional]") {
  auto model = model_with_a_lambda();
  CHECK(model->parameters().size() == 4);  // the two Linears' only: the lambda owns nothing
  mg::optim::Adam optimizer(model->parameters(), {.lr = 0.02});
  mg::Generator generator(11);
  const mg::Tensor inputs = mg::randn({64, 2}, {}, &generator);
  const mg::Tensor targets = mg::sum(inputs * inputs, {1}, /*keepdim=*/true);  // y = x1^2 + x2^2

  std::vector<double> losses;
  for (int step = 0; step < 200; ++step) {
    mg::Tensor loss = mg::mse_loss((*model)(inputs), targets);
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    losses.push_back(loss.item());
  }
  INFO("first loss " << losses.front() << ", last " << losses.back());
  CHECK(losses.back() < 0.05 * losses.front());
}

TEST_CASE("Functional prints its name and is labelled by its place for the Recorder", "[nn][functional]") {
  auto model = model_with_a_lambda();
  CHECK(model->str() ==
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=16, bias=true)\n"
        "  (1): Functional(relu_times_x)\n"
        "  (2): Linear(in_features=16, out_features=1, bias=true)\n"
        ")");
  CHECK(mg::nn::Functional([](const mg::Tensor& x) { return x; }).str() == "Functional()");

  mg::memory::Recorder recorder({.device = mg::Device::cpu()});
  recorder.start();
  mg::Tensor output = (*model)(mg::randn({4, 2}));
  recorder.stop();
  const std::vector<mg::memory::MemoryEvent> events = recorder.timeline().events;
  CHECK(std::any_of(events.begin(), events.end(), [](const mg::memory::MemoryEvent& event) {
    return event.kind == mg::memory::EventKind::Allocate && event.module_path == "1";
  }));
}

TEST_CASE("Functional refuses an empty function", "[nn][functional]") {
  CHECK_THROWS_WITH(mg::nn::Functional(nullptr, "gap"), Contains("Functional(gap): the function is empty"));
}
