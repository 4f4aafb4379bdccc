// tests/optim/test_optimizer_state.cpp — optimizer checkpoints (optim/state_dict.h): a run
// interrupted, saved and resumed ends with bit-identical parameters to one that was not;
// a checkpoint that does not fit the optimizer, or a damaged file, is refused with a
// message naming the difference, and changes nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/autograd/loss.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/core/random.h"
#include "memgrad/io/safetensors.h"
#include "data/mnist_test_files.h"
#include "memgrad/nn/nn.h"
#include "memgrad/optim/optim.h"

using namespace mg;
using Catch::Matchers::Contains;
using mg_test::TempDir;

namespace {

// 5 -> 4 -> 3, initialised from a fixed seed so that two copies start identical.
std::shared_ptr<nn::Module> make_model(int64_t inputs = 5) {
  Generator generator(7);
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(inputs, 4, true, &generator),
                                          std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(4, 3, true, &generator));
}

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>&)>;

std::unique_ptr<optim::Optimizer> make_sgd(const std::vector<Tensor>& params) {
  return std::make_unique<optim::SGD>(
      params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
}

std::unique_ptr<optim::Optimizer> make_adam(const std::vector<Tensor>& params) {
  return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 0.01, .weight_decay = 1e-4});
}

// Steps [first, last) of a run whose batch depends only on the step number.
void train(nn::Module& model, optim::Optimizer& optimizer, int first, int last) {
  for (int step = first; step < last; ++step) {
    Generator data(100 + step);
    const Tensor inputs = randn({8, 5}, {}, &data);
    const Tensor targets = randint(0, 3, {8}, {.dtype = DType::Int64}, &data);
    optimizer.zero_grad();
    cross_entropy(model(inputs), targets).backward();
    optimizer.step();
  }
}

std::vector<std::vector<float>> parameter_values(const nn::Module& model) {
  std::vector<std::vector<float>> values;
  for (const Tensor& param : model.parameters()) values.push_back(param.to_vector<float>());
  return values;
}

// An optimizer checkpoint of `make`'s optimizer after three steps, at dir/name.
std::string saved_checkpoint(const TempDir& dir, const MakeOptimizer& make, const std::string& name) {
  auto model = make_model();
  auto optimizer = make(model->parameters());
  train(*model, *optimizer, 0, 3);
  const std::string path = dir.file(name);
  optim::save(*optimizer, path);
  return path;
}

}  // namespace

TEST_CASE("a resumed run matches an uninterrupted one bit for bit", "[optim][checkpoint]") {
  const auto [kind, make] = GENERATE(table<std::string, MakeOptimizer>({
      {"SGD", make_sgd},
      {"Adam", make_adam},
  }));
  INFO(kind);
  TempDir dir("optim-state");

  auto straight_model = make_model();
  auto straight = make(straight_model->parameters());
  train(*straight_model, *straight, 0, 6);

  auto first_model = make_model();
  auto first = make(first_model->parameters());
  train(*first_model, *first, 0, 3);
  first->set_lr(first->lr() * 0.5);  // as a scheduler would have: the lr must come back too
  nn::save(*first_model, dir.file("model.safetensors"));
  optim::save(*first, dir.file("optim.safetensors"), {{"epoch", "3"}});

  auto resumed_model = make_model();
  auto resumed = make(resumed_model->parameters());
  nn::load(*resumed_model, dir.file("model.safetensors"));
  optim::load(*resumed, dir.file("optim.safetensors"));
  CHECK(optim::kind_name(*resumed) == kind);
  CHECK(resumed->lr() == first->lr());
  CHECK(resumed->state_bytes() == first->state_bytes());
  const Tensor first_param = resumed_model->parameters()[0];
  REQUIRE(resumed->state(first_param) != nullptr);
  CHECK(resumed->state(first_param)->bytes() > 0);

  resumed->set_lr(straight->lr());
  train(*resumed_model, *resumed, 3, 6);
  CHECK(parameter_values(*resumed_model) == parameter_values(*straight_model));
}

TEST_CASE("an optimizer checkpoint names its entries as PyTorch does", "[optim][checkpoint]") {
  auto model = make_model();
  auto adam = make_adam(model->parameters());
  train(*model, *adam, 0, 1);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : optim::state_dict(*adam).tensors) names.push_back(name);
  for (const char* expected : {"state.0.exp_avg", "state.0.exp_avg_sq", "state.3.step", "param_groups.0.lr",
                               "param_groups.0.beta2", "param_groups.0.params"}) {
    INFO(expected);
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  }
  TempDir dir("optim-state");
  optim::save(*adam, dir.file("adam.safetensors"), {{"epoch", "1"}});
  const auto metadata = read_safetensors_metadata(dir.file("adam.safetensors"));
  CHECK(std::find(metadata.begin(), metadata.end(), std::pair<std::string, std::string>("optimizer", "Adam")) !=
        metadata.end());
  CHECK(std::find(metadata.begin(), metadata.end(), std::pair<std::string, std::string>("epoch", "1")) !=
        metadata.end());
}

TEST_CASE("a checkpoint that does not fit the optimizer is refused and changes nothing",
          "[optim][checkpoint]") {
  TempDir dir("optim-state");
  const std::string adam_file = saved_checkpoint(dir, make_adam, "adam.safetensors");
  const std::string sgd_file = saved_checkpoint(dir, make_sgd, "sgd.safetensors");

  auto model = make_model();
  auto sgd = make_sgd(model->parameters());
  train(*model, *sgd, 0, 1);
  const int64_t bytes_before = sgd->state_bytes();
  const double lr_before = sgd->lr();

  SECTION("another kind of optimizer") {
    CHECK_THROWS_WITH(optim::load(*sgd, adam_file),
                      Contains("optimizer checkpoint '" + adam_file + "' was written by Adam but this is SGD"));
  }
  SECTION("other hyper-parameters") {
    optim::SGD other(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.5, .weight_decay = 1e-3});
    CHECK_THROWS_WITH(optim::load(other, sgd_file),
                      Contains("was saved with momentum = 0.9 but this SGD has momentum = 0.5"));
  }
  SECTION("fewer parameters") {
    auto smaller = std::make_shared<nn::Linear>(5, 4);
    auto other = make_sgd(smaller->parameters());
    CHECK_THROWS_WITH(optim::load(*other, sgd_file),
                      Contains("parameter group 0 holds 4 parameters but this SGD's group 0 holds 2"));
  }
  SECTION("parameters of other shapes") {
    auto wider = make_model(6);
    auto other = make_sgd(wider->parameters());
    CHECK_THROWS_WITH(optim::load(*other, sgd_file),
                      Contains("\"state.0.momentum_buffer\" is [4, 5] float32 but parameter 0 needs [4, 6] float32"));
  }
  SECTION("a model's file") {
    nn::save(*model, dir.file("model.safetensors"));
    CHECK_THROWS_WITH(optim::load(*sgd, dir.file("model.safetensors")), Contains("names no optimizer"));
  }
  SECTION("a truncated file") {
    const auto size = std::filesystem::file_size(sgd_file);
    std::filesystem::resize_file(sgd_file, size - 7);
    CHECK_THROWS_AS(optim::load(*sgd, sgd_file), Error);
    CHECK_THROWS_WITH(optim::load(*sgd, sgd_file), Contains(sgd_file));
  }
  SECTION("a file with garbage for a header") {
    std::ofstream(sgd_file, std::ios::binary | std::ios::trunc) << "not a safetensors file at all";
    CHECK_THROWS_AS(optim::load(*sgd, sgd_file), Error);
  }
  CHECK(sgd->state_bytes() == bytes_before);
  CHECK(sgd->lr() == lr_before);
}

TEST_CASE("optimizers update channels-last parameters in their own layout", "[optim][checkpoint]") {
  // The same values as (2, 3, 2, 2) NCHW and as channels-last parameters, given the same
  // (NCHW) gradients: every step must agree element for element, and the state must follow
  // the parameter's layout, also after a checkpoint round trip.
  Generator generator(3);
  const Tensor start = randn({2, 3, 2, 2}, {}, &generator);
  Tensor plain = start.clone().detach().requires_grad_();
  Tensor channels_last = contiguous_copy(start, MemoryFormat::ChannelsLast).requires_grad_();
  REQUIRE(!channels_last.is_contiguous());
  auto make = [](const Tensor& param) {
    return std::make_unique<optim::SGD>(std::vector<Tensor>{param},
                                        optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  };
  auto plain_sgd = make(plain);
  auto channels_last_sgd = make(channels_last);
  TempDir dir("optim-state");
  for (int step = 0; step < 3; ++step) {
    const Tensor grad = randn({2, 3, 2, 2}, {}, &generator);
    plain.set_grad(grad.clone());
    channels_last.set_grad(grad.clone());
    plain_sgd->step();
    channels_last_sgd->step();
    if (step == 1) {  // round trip the channels-last optimizer's state through a file
      optim::save(*channels_last_sgd, dir.file("sgd.safetensors"));
      channels_last_sgd = make(channels_last);
      optim::load(*channels_last_sgd, dir.file("sgd.safetensors"));
    }
  }
  CHECK(channels_last.to_vector<float>() == plain.to_vector<float>());  // row-major values
  CHECK(channels_last.strides() == strides_for(channels_last.sizes(), MemoryFormat::ChannelsLast));
  const Tensor buffer = channels_last_sgd->state(channels_last)->momentum_buffer;
  CHECK(buffer.strides() == channels_last.strides());
}
