// tests/consumer/main.cpp — a program outside memgrad's tree, built against an installed
// memgrad with find_package (tests/consumer/CMakeLists.txt, the one README.md shows): a
// module of its own (a submodule and parameters of its own) learns a made-up regression in
// a few steps. Exits 1 unless the loss falls; prints where the memory went.
#include <cstdio>
#include <iostream>
#include <memory>

#include <memgrad/memgrad.h>

// (B, inputs) -> (B, 1): a tanh hidden layer (a registered submodule) and an output layer
// written by hand with the module's own parameters.
class Regressor : public mg::nn::Module {
 public:
  Regressor(int64_t inputs, int64_t hidden) : Module("Regressor") {
    hidden_layer = register_module("hidden", std::make_shared<mg::nn::Linear>(inputs, hidden));
    output_weight = register_parameter("output_weight", mg::randn({hidden, 1}) * 0.1);
    output_bias = register_parameter("output_bias", mg::zeros({1}));
  }

  mg::Tensor forward(const mg::Tensor& x) override {
    return (*hidden_layer)(x).tanh().matmul(output_weight) + output_bias;
  }

  std::shared_ptr<mg::nn::Linear> hidden_layer;
  mg::Tensor output_weight;  // (hidden, 1)
  mg::Tensor output_bias;    // (1)
};

int main() {
  mg::manual_seed(0);
  constexpr int64_t kSamples = 256, kInputs = 8, kHidden = 32, kSteps = 100;
  // Targets a fixed linear map of the inputs, plus a little noise.
  const mg::Tensor inputs = mg::randn({kSamples, kInputs});
  const mg::Tensor targets = inputs.matmul(mg::randn({kInputs, 1}) * 0.5) + mg::randn({kSamples, 1}) * 0.05;

  auto model = std::make_shared<Regressor>(kInputs, kHidden);
  mg::optim::Adam optimizer(model->parameters(), {.lr = 1e-2});
  double first_loss = 0, last_loss = 0;
  for (int64_t step = 0; step < kSteps; ++step) {
    optimizer.zero_grad();
    mg::Tensor loss = mg::mse_loss((*model)(inputs), targets);
    loss.backward();
    optimizer.step();
    last_loss = loss.item();
    if (step == 0) first_loss = last_loss;
  }
  std::printf("%s\n%lld parameters; loss %.4f after the first step, %.4f after %lld\n", model->str().c_str(),
              static_cast<long long>(model->num_parameters()), first_loss, last_loss,
              static_cast<long long>(kSteps));
  std::cout << mg::memory::report();
  if (!(last_loss < 0.1 * first_loss)) {
    std::fprintf(stderr, "FAILED: the loss went from %.4f to %.4f (expected below a tenth)\n", first_loss, last_loss);
    return 1;
  }
  return 0;
}
