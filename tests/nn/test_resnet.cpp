// tests/nn/test_resnet.cpp — the convolutional layers (Conv2d, BatchNorm2d, pooling,
// ModuleList) and torchvision's ResNets: parameter counts and state_dict keys that must
// match torchvision's, and one small forward/backward through every layer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/nn/nn.h"

namespace {

using mg::DType;
using mg::Tensor;

bool has_key(const mg::nn::NamedTensors& tensors, const std::string& key) {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& entry) { return entry.first == key; });
}

double max_abs(const Tensor& tensor) {
  double result = 0;
  for (float value : tensor.to_vector<float>()) result = std::max(result, std::abs(static_cast<double>(value)));
  return result;
}

}  // namespace

TEST_CASE("Conv2d initialises as torch.nn.Conv2d: uniform within 1/sqrt(fan_in)", "[resnet]") {
  mg::Generator generator(7);
  mg::nn::Conv2d conv(4, 8, 3, {}, true, &generator);
  REQUIRE(conv.weight.sizes() == mg::Shape{8, 4, 3, 3});
  REQUIRE(conv.bias.sizes() == mg::Shape{8});
  double bound = 1.0 / std::sqrt(4.0 * 3 * 3);
  CHECK(max_abs(conv.weight) <= bound);
  CHECK(max_abs(conv.weight) > 0.8 * bound);  // spread over the whole range, not squeezed
  CHECK(max_abs(conv.bias) <= bound);
  CHECK(conv.extra_repr() == "4, 8, kernel_size=(3, 3), stride=(1, 1)");

  mg::Conv2dOptions options;
  options.stride = {2, 2};
  options.padding = {1, 1};
  options.groups = 2;
  mg::nn::Conv2d grouped(4, 8, {3, 3}, options, false);
  CHECK(grouped.weight.sizes() == mg::Shape{8, 2, 3, 3});
  CHECK_FALSE(grouped.bias.defined());
  CHECK(grouped.extra_repr() == "4, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2, bias=False");
  CHECK_THROWS_WITH(mg::nn::Conv2d(3, 8, 3, options), Catch::Contains("groups"));
}

TEST_CASE("BatchNorm2d keeps PyTorch's state and switches statistics between train and eval", "[resnet]") {
  mg::nn::BatchNorm2d bn(2);
  auto state = bn.state_dict();
  REQUIRE(state.size() == 5);
  CHECK(state[0].first == "weight");
  CHECK(state[4].first == "num_batches_tracked");
  CHECK(bn.num_batches_tracked.dtype() == DType::Int64);
  CHECK(bn.num_batches_tracked.dim() == 0);
  CHECK(bn.extra_repr() == "2, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True");

  mg::Generator generator(3);
  Tensor input = mg::randn({4, 2, 3, 3}, {}, &generator).mul_(2.0).add_(5.0);

  // Evaluation with fresh statistics (mean 0, var 1) is the identity up to eps, and
  // counts no batch.
  bn.eval();
  std::vector<float> evaluated = bn(input).to_vector<float>();
  std::vector<float> original = input.to_vector<float>();
  for (size_t i = 0; i < original.size(); ++i) CHECK(evaluated[i] == Approx(original[i] / std::sqrt(1 + 1e-5)));
  CHECK(bn.num_batches_tracked.item<int64_t>() == 0);

  // Training normalises with the batch's statistics and moves the running mean 10% towards
  // the batch mean (about 5).
  bn.train();
  std::vector<float> trained = bn(input).to_vector<float>();
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);
  double output_mean = 0;
  for (float value : trained) output_mean += value;
  CHECK(output_mean / trained.size() == Approx(0.0).margin(1e-4));
  for (float mean : bn.running_mean.to_vector<float>()) CHECK(mean == Approx(0.5).margin(0.15));
  CHECK_THROWS_WITH(bn(mg::zeros({1, 3, 2, 2})), Catch::Contains("num_features"));
}

namespace {

// A fused BatchNorm2d forward against the plain module's output through `reference`, in
// training and evaluation: the same values and running statistics, one node of
// `node_name` while training, and the batch counted once.
void check_fused_batch_norm(const std::function<Tensor(mg::nn::BatchNorm2d&, const Tensor&)>& fused_forward,
                            const std::function<Tensor(const Tensor&)>& reference, const char* node_name,
                            uint64_t seed) {
  mg::Generator generator(seed);
  Tensor input = mg::randn({4, 3, 3, 3}, {}, &generator);
  mg::nn::BatchNorm2d fused(3), plain(3);
  for (bool training : {true, false}) {
    fused.train(training);
    plain.train(training);
    Tensor out = fused_forward(fused, input.detach().requires_grad_());
    if (training) CHECK(std::string(out.grad_fn()->name()) == node_name);
    std::vector<float> got = out.to_vector<float>();
    std::vector<float> want = reference(plain(input)).to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-6));
    for (const auto& [fused_buffer, plain_buffer] : {std::pair{fused.running_mean, plain.running_mean},
                                                     std::pair{fused.running_var, plain.running_var}}) {
      std::vector<float> fused_values = fused_buffer.to_vector<float>(), plain_values = plain_buffer.to_vector<float>();
      for (size_t c = 0; c < fused_values.size(); ++c) CHECK(fused_values[c] == Approx(plain_values[c]).margin(1e-7));
    }
  }
  CHECK(fused.num_batches_tracked.item<int64_t>() == 1);
}

}  // namespace

TEST_CASE("BatchNorm2d::forward_relu is relu(forward), one node, counting the batch once", "[resnet]") {
  check_fused_batch_norm([](mg::nn::BatchNorm2d& bn, const Tensor& x) { return bn.forward_relu(x); },
                         [](const Tensor& y) { return mg::relu(y); }, "BatchNormReluBackward", 5);
}

TEST_CASE("BatchNorm2d::forward_add_relu is relu(forward + residual), one node, counting the batch once",
          "[resnet]") {
  mg::Generator generator(6);
  Tensor residual = mg::randn({4, 3, 3, 3}, {}, &generator);
  check_fused_batch_norm([&](mg::nn::BatchNorm2d& bn, const Tensor& x) { return bn.forward_add_relu(x, residual); },
                         [&](const Tensor& y) { return mg::relu(mg::add(y, residual)); }, "BatchNormAddReluBackward",
                         7);
}

TEST_CASE("BatchNorm2d counts training batches, not evaluations, and not a checkpoint's recompute", "[resnet]") {
  mg::Generator generator(9);
  Tensor input = mg::randn({4, 3, 3, 3}, {}, &generator), residual = mg::randn({4, 3, 3, 3}, {}, &generator);
  mg::nn::BatchNorm2d bn(3);
  auto count = [&] { return bn.num_batches_tracked.item<int64_t>(); };
  auto step = [&] {  // one batch through each forward
    bn(input);
    bn.forward_relu(input);
    bn.forward_add_relu(input, residual);
  };
  step();
  CHECK(count() == 3);
  bn.eval();
  step();
  CHECK(count() == 3);
  bn.train();

  // The recompute for backward normalises the batch again but counts it no second time.
  Tensor x = input.detach().requires_grad_();
  Tensor y = mg::checkpoint([&](const Tensor& in) { return bn.forward_relu(in); }, x);
  CHECK(count() == 4);
  std::vector<float> running_mean = bn.running_mean.to_vector<float>();
  mg::sum(y).backward();
  CHECK(x.grad().defined());
  CHECK(count() == 4);
  CHECK(bn.running_mean.to_vector<float>() == running_mean);
}

TEST_CASE("Pooling layers and ModuleList", "[resnet]") {
  Tensor input = mg::randn({1, 2, 8, 8});
  CHECK(mg::nn::MaxPool2d(3, 2, 1)(input).sizes() == mg::Shape{1, 2, 4, 4});
  CHECK(mg::nn::AvgPool2d(2)(input).sizes() == mg::Shape{1, 2, 4, 4});
  CHECK(mg::nn::AdaptiveAvgPool2d({1, 1})(input).sizes() == mg::Shape{1, 2, 1, 1});
  CHECK(mg::nn::MaxPool2d(3, 2, 1).extra_repr() ==
        "kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1), ceil_mode=False");

  auto list = std::make_shared<mg::nn::ModuleList>();
  list->push_back(std::make_shared<mg::nn::Linear>(2, 3));
  list->push_back(std::make_shared<mg::nn::ReLU>());
  CHECK(list->size() == 2);
  CHECK(list->named_parameters()[0].first == "0.weight");
  CHECK((*list)[1]->type_name() == "ReLU");
  CHECK_THROWS_WITH((*list)[2], Catch::Contains("out of range"));
}

TEST_CASE("ResNets have torchvision's parameter counts and names", "[resnet]") {
  auto model = mg::nn::resnet18();
  CHECK(model->num_parameters() == 11'689'512);
  auto parameters = model->named_parameters();
  CHECK(has_key(parameters, "layer1.0.conv1.weight"));
  CHECK(has_key(parameters, "layer2.0.downsample.0.weight"));
  CHECK(has_key(parameters, "layer2.0.downsample.1.bias"));
  CHECK(has_key(parameters, "fc.bias"));
  CHECK_FALSE(has_key(parameters, "layer1.0.downsample.0.weight"));  // same shape: identity shortcut
  auto state = model->state_dict();
  CHECK(has_key(state, "bn1.running_mean"));
  CHECK(has_key(state, "bn1.num_batches_tracked"));
  CHECK(has_key(state, "layer4.1.bn2.running_var"));

  CHECK(mg::nn::resnet50()->num_parameters() == 25'557'032);
  CHECK(mg::nn::resnet34({.num_classes = 10})->num_parameters() == 21'797'672 - 513 * 990);
}

TEST_CASE("A small-image resnet18 runs forward and backward through every parameter", "[resnet]") {
  mg::Generator generator(11);
  auto model = mg::nn::resnet18({.num_classes = 10, .small_image_stem = true, .generator = &generator});
  CHECK(model->maxpool == nullptr);
  CHECK(model->conv1->extra_repr() == "3, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False");

  // torchvision's kaiming_normal_(fan_out, relu): std = sqrt(2 / (64 * 3 * 3)).
  std::vector<float> weights = model->conv1->weight.to_vector<float>();
  double square_sum = 0;
  for (float value : weights) square_sum += static_cast<double>(value) * value;
  CHECK(std::sqrt(square_sum / weights.size()) == Approx(std::sqrt(2.0 / (64 * 9))).epsilon(0.1));

  Tensor input = mg::randn({2, 3, 32, 32}, {}, &generator);
  Tensor output = model->forward(input);
  REQUIRE(output.sizes() == mg::Shape{2, 10});
  mg::sum(output).backward();
  for (const auto& [name, parameter] : model->named_parameters()) {
    INFO(name);
    CHECK(parameter.grad().defined());
  }
  CHECK(model->bn1->num_batches_tracked.item<int64_t>() == 1);
}
