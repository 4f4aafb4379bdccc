// docs/guide/01_train.cpp — the guide's first program: a model of your own, a DataLoader,
// the training loop and evaluation, on the GPU when there is one (docs/guide.md, sections
// 1 to 4). Fails (exit 1) unless the loss falls and the model learns the data.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <memgrad/memgrad.h>

#include "data.h"
#include "device.h"
#include "net.h"
#include "training.h"

namespace {

// The aside of "Data": the same classes read Fashion-MNIST when it is installed; without it
// there is nothing to show.
void show_fashion_mnist() {
  // [guide: fashion-mnist]
  const std::string folder = "/usr/share/datasets/fashion-mnist";  // Debian's dataset-fashion-mnist
  if (std::filesystem::exists(folder)) {
    mg::data::MnistDataset train(folder, mg::data::Split::Train);
    mg::data::MnistDataset test(folder, mg::data::Split::Test, {.normalization = train.normalization()});
    std::cout << "Fashion-MNIST: " << train.size() << " + " << test.size() << " images of " << train.image_shape()
              << ", " << train.num_classes() << " classes\n";
  }
  // [guide: end]
}

}  // namespace

int main() {
  mg::manual_seed(0);  // the initial weights
  // [guide: setup]
  const mg::Device device = pick_device();
  Data data(device);
  auto model = std::make_shared<Net>();
  model->to(device);  // moves every parameter in place, as PyTorch's model.to(device)
  mg::optim::Adam optimizer(model->parameters(), {.lr = 1e-3});
  // [guide: end]
  std::printf("device: %s\n%s\n%lld parameters\n", device.str().c_str(), model->str().c_str(),
              static_cast<long long>(model->num_parameters()));
  show_fashion_mnist();

  const double accuracy_before = accuracy(*model, data.test_loader);
  const auto start = std::chrono::steady_clock::now();
  // [guide: loop]
  std::vector<double> losses;
  for (int epoch = 0; epoch < 5; ++epoch) {
    losses.push_back(train_epoch(*model, optimizer, data.train_loader));
    std::printf("epoch %d: training loss %.4f, test accuracy %.1f%%\n", epoch + 1, losses.back(),
                100 * accuracy(*model, data.test_loader));
  }
  // [guide: end]
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double accuracy_after = accuracy(*model, data.test_loader);
  std::printf("test accuracy %.1f%% before training; 5 epochs (%lld steps) in %.2f s; the nearest of the ten "
              "patterns is right for %.1f%% of the test split\n", 100 * accuracy_before,
              static_cast<long long>(5 * data.train_loader.num_batches()), seconds,
              100 * data.synthetic.nearest_pattern_accuracy());

  if (!(losses.back() < 0.5 * losses.front()) || accuracy_after < 0.9) {
    std::fprintf(stderr, "FAILED: the loss went from %.4f to %.4f (expected to halve at least), test accuracy "
                 "%.1f%% (expected >= 90%%)\n", losses.front(), losses.back(), 100 * accuracy_after);
    return 1;
  }
  return 0;
}
