// tests/consumer/main.cpp — a program outside memgrad's tree, built against an installed
// memgrad with find_package (tests/consumer/CMakeLists.txt, the one README.md shows): a
// module of its own (a submodule and parameters of its own) learns a made-up regression
// held in memory (TensorDataset, DataLoader), saves a checkpoint and loads it back. Exits 1
// unless the loss falls and the checkpoint restores the trained model; prints where the
// memory went. Its middle is README.md's first example.
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
  constexpr int64_t kSamples = 256, kInputs = 8;
  // Targets a fixed linear map of the inputs, plus a little noise.
  const mg::Tensor inputs = mg::randn({kSamples, kInputs});
  const mg::Tensor targets = inputs.matmul(mg::randn({kInputs, 1}) * 0.5) + mg::randn({kSamples, 1}) * 0.05;
  auto whole_data_loss = [&](mg::nn::Module& model) {
    mg::NoGradGuard no_grad;
    return mg::mse_loss(model(inputs), targets).item();
  };
  // What predicting 0 for everything would score: the bar the model must beat tenfold.
  const double first_loss = (targets * targets).mean().item();

  // The README's first example, as it is there (tests/package/readme_shows_consumer.cmake):
  // [readme]
  auto model = std::make_shared<Regressor>(8, 32);     // an nn::Module of your own
  mg::data::TensorDataset dataset({inputs, targets});  // your own tensors, in memory
  mg::data::DataLoader loader(dataset, {.batch_size = 32, .shuffle = true});
  mg::optim::Adam optimizer(model->parameters(), {.lr = 1e-2});
  for (int epoch = 0; epoch < 20; ++epoch) {
    for (const mg::data::Batch& batch : loader) {
      optimizer.zero_grad();
      mg::Tensor loss = mg::mse_loss((*model)(batch.inputs), batch.targets);
      loss.backward();
      optimizer.step();
    }
  }
  mg::save_checkpoint("regressor.safetensors", {.model = model.get(), .optimizer = &optimizer, .epoch = 20});
  std::cout << mg::memory::report();  // where every byte went: parameters, gradients, ...
  // [readme: end]

  const double last_loss = whole_data_loss(*model);
  std::printf("%s\n%lld parameters; loss %.4f predicting zeros, %.4f after 20 epochs\n", model->str().c_str(),
              static_cast<long long>(model->num_parameters()), first_loss, last_loss);
  if (!(last_loss < 0.1 * first_loss)) {
    std::fprintf(stderr, "FAILED: the loss went from %.4f to %.4f (expected below a tenth)\n", first_loss, last_loss);
    return 1;
  }
  // The checkpoint restores the weights into a fresh model.
  auto restored = std::make_shared<Regressor>(kInputs, 32);
  mg::load_checkpoint("regressor.safetensors", {.model = restored.get()});
  if (whole_data_loss(*restored) != last_loss) {
    std::fprintf(stderr, "FAILED: the model loaded from regressor.safetensors does not give the trained loss\n");
    return 1;
  }
  return 0;
}
