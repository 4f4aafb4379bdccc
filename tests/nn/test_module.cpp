// tests/nn/test_module.cpp — Module: dotted names and traversal, parameter counts and their
// memory category, train/eval, zero_grad, state_dict, moving with to(), printing.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"
#include "memgrad/nn/nn.h"

namespace {

using mg::Device;
using mg::DType;
using mg::MemoryCategory;
using mg::MemoryFormat;
using mg::Tensor;
using mg::nn::BatchNorm2d;
using mg::nn::Conv2d;
using mg::nn::Linear;
using mg::nn::Module;
using mg::nn::ReLU;
using mg::nn::Sequential;

// A custom module holding a Sequential, a head and a buffer: the nesting of a real model.
class Net : public Module {
 public:
  Net() : Module("Net") {
    body = register_module("body", std::make_shared<Sequential>(std::make_shared<Linear>(4, 3),
                                                                std::make_shared<ReLU>(),
                                                                std::make_shared<Linear>(3, 2)));
    head = register_module("head", std::make_shared<Linear>(2, 1));
    scale = register_buffer("scale", mg::ones({1}));
  }
  Tensor forward(const Tensor& input) override { return head->forward(body->forward(input)) * scale; }

  std::shared_ptr<Sequential> body;
  std::shared_ptr<Linear> head;
  Tensor scale;
};

// A module that exposes registration to the tests.
class Open : public Module {
 public:
  Open() : Module("Open") {}
  using Module::register_buffer;
  using Module::register_module;
  using Module::register_parameter;
};

std::shared_ptr<Sequential> make_mlp(mg::Generator* generator = nullptr) {
  return std::make_shared<Sequential>(
      std::make_shared<Linear>(784, 512, true, generator), std::make_shared<ReLU>(),
      std::make_shared<Linear>(512, 256, true, generator), std::make_shared<ReLU>(),
      std::make_shared<Linear>(256, 10, true, generator));
}

int64_t category_bytes(MemoryCategory category, Device device = Device::cpu()) {
  return mg::allocator_for(device).stats().category(category).current;
}

template <class Named>
std::vector<std::string> names_of(const Named& named) {
  std::vector<std::string> names;
  for (const auto& entry : named) names.push_back(entry.first);
  return names;
}

using Names = std::vector<std::string>;

// A forward and backward pass of `model` on a small batch, leaving .grad on every parameter.
void run_backward(Module& model, int64_t in_features, DType dtype = DType::Float32) {
  mg::Generator generator(7);
  Tensor input = mg::randn({4, in_features}, {.dtype = dtype}, &generator);
  mg::sum(model(input)).backward();
}

}  // namespace

TEST_CASE("named_parameters of a nested model use dotted names, depth-first", "[nn]") {
  auto net = std::make_shared<Net>();
  CHECK(names_of(net->named_parameters()) ==
        Names{"body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias", "head.weight", "head.bias"});
  CHECK(names_of(net->named_parameters(/*recurse=*/false)).empty());
  CHECK(names_of(net->head->named_parameters(false)) == Names{"weight", "bias"});
  CHECK(names_of(net->named_buffers()) == Names{"scale"});
  CHECK(names_of(net->named_children()) == Names{"body", "head"});
  CHECK(names_of(net->named_modules()) == Names{"", "body", "body.0", "body.1", "body.2", "head"});
  CHECK(net->named_modules()[0].second.get() == net.get());
  CHECK(net->named_modules()[3].second->type_name() == "ReLU");
  // state_dict goes module by module: own parameters, own buffers, then the submodules.
  CHECK(names_of(net->state_dict()) == Names{"scale", "body.0.weight", "body.0.bias", "body.2.weight",
                                             "body.2.bias", "head.weight", "head.bias"});

  // The listed tensors are the modules' own handles, not copies.
  auto body_first = std::static_pointer_cast<Linear>((*net->body)[0]);
  CHECK(net->parameters()[0].is_same(body_first->weight));
  CHECK(net->parameters()[5].is_same(net->head->bias));
  CHECK(net->buffers()[0].is_same(net->scale));
  CHECK(net->num_parameters() == (4 * 3 + 3) + (3 * 2 + 2) + (2 * 1 + 1));
}

TEST_CASE("a module or parameter shared twice is listed and counted once", "[nn]") {
  auto shared = std::make_shared<Linear>(3, 3);
  Sequential tied{shared, std::make_shared<ReLU>(), shared};
  CHECK(names_of(tied.named_parameters()) == Names{"0.weight", "0.bias"});
  CHECK(tied.num_parameters() == 12);
  // state_dict keeps every name, as PyTorch's does.
  CHECK(names_of(tied.state_dict()) == Names{"0.weight", "0.bias", "2.weight", "2.bias"});
}

TEST_CASE("registration tags PARAMETER, sets requires_grad and checks names", "[nn]") {
  auto module = std::make_shared<Open>();
  Tensor weight = module->register_parameter("weight", mg::zeros({2, 2}));
  CHECK(weight.requires_grad());
  CHECK(weight.memory_category() == MemoryCategory::Parameter);
  Tensor frozen = module->register_parameter("frozen", mg::zeros({2}), /*requires_grad=*/false);
  CHECK_FALSE(frozen.requires_grad());
  Tensor counter = module->register_buffer("counter", mg::zeros({1}, {.dtype = DType::Int64}));
  CHECK(counter.memory_category() == MemoryCategory::Parameter);
  CHECK_FALSE(counter.requires_grad());

  CHECK_THROWS_WITH(module->register_parameter("fc.weight", mg::zeros({1})),
                    Catch::Contains("Open: cannot register parameter \"fc.weight\"") &&
                        Catch::Contains("no '.'"));
  CHECK_THROWS_WITH(module->register_parameter("", mg::zeros({1})), Catch::Contains("non-empty"));
  CHECK_THROWS_WITH(module->register_buffer("weight", mg::zeros({1})),
                    Catch::Contains("cannot register buffer \"weight\"") &&
                        Catch::Contains("already has a parameter, buffer or submodule of that name"));
  CHECK_THROWS_WITH(module->register_module("counter", std::make_shared<ReLU>()),
                    Catch::Contains("already has"));
  CHECK_THROWS_WITH(module->register_module("child", std::shared_ptr<ReLU>()), Catch::Contains("null"));
  CHECK_THROWS_WITH(module->register_parameter("none", Tensor()), Catch::Contains("undefined"));
  Tensor leaf = mg::ones({2}, {.requires_grad = true});
  CHECK_THROWS_WITH(module->register_parameter("computed", leaf * 2.0),
                    Catch::Contains("must be a leaf") && Catch::Contains("detach()"));
}

TEST_CASE("a module without a single-input forward says so", "[nn]") {
  auto plain = std::make_shared<Module>("Custom");
  CHECK_THROWS_WITH(plain->forward(mg::zeros({1})), Catch::StartsWith("Custom has no single-input forward"));
}

TEST_CASE("the 784-512-256-10 MLP has 535,818 parameters, all PARAMETER memory", "[nn]") {
  int64_t parameter_bytes_before = category_bytes(MemoryCategory::Parameter);
  int64_t temporary_bytes_before = category_bytes(MemoryCategory::Temporary);
  auto mlp = make_mlp();
  CHECK(mlp->num_parameters() == 535818);
  CHECK(category_bytes(MemoryCategory::Parameter) - parameter_bytes_before == 535818 * 4);
  CHECK(category_bytes(MemoryCategory::Gradient) == 0);
  CHECK(category_bytes(MemoryCategory::Temporary) == temporary_bytes_before);
  for (const Tensor& parameter : mlp->parameters()) {
    CHECK(parameter.requires_grad());
    CHECK(parameter.memory_category() == MemoryCategory::Parameter);
  }
  mlp.reset();
  CHECK(category_bytes(MemoryCategory::Parameter) == parameter_bytes_before);
}

TEST_CASE("train and eval reach every submodule", "[nn]") {
  auto inner = std::make_shared<Sequential>(std::make_shared<mg::nn::Dropout>(0.5));
  auto model = std::make_shared<Sequential>(std::make_shared<Linear>(2, 2), inner);
  auto all_training = [&](bool expected) {
    for (const auto& [name, module] : model->named_modules()) {
      if (module->is_training() != expected) return false;
    }
    return true;
  };
  CHECK(all_training(true));
  model->eval();
  CHECK(all_training(false));
  model->train();
  CHECK(all_training(true));
  model->train(false);
  CHECK(all_training(false));
}

TEST_CASE("zero_grad frees GRADIENT memory by default, or keeps zeros", "[nn]") {
  auto net = std::make_shared<Net>();
  int64_t gradient_bytes_before = category_bytes(MemoryCategory::Gradient);
  run_backward(*net, 4);
  int64_t parameter_bytes = 0;
  for (const Tensor& parameter : net->parameters()) {
    REQUIRE(parameter.grad().defined());
    parameter_bytes += static_cast<int64_t>(parameter.nbytes());
  }
  CHECK(category_bytes(MemoryCategory::Gradient) - gradient_bytes_before == parameter_bytes);

  SECTION("set_to_none") {
    net->zero_grad();
    for (const Tensor& parameter : net->parameters()) CHECK_FALSE(parameter.grad().defined());
    CHECK(category_bytes(MemoryCategory::Gradient) == gradient_bytes_before);
  }
  SECTION("keep zeros") {
    Tensor head_grad = net->head->weight.grad();
    net->zero_grad(/*set_to_none=*/false);
    CHECK(net->head->weight.grad().is_same(head_grad));
    for (const Tensor& parameter : net->parameters()) {
      CHECK(parameter.grad().to_vector<float>() == std::vector<float>(parameter.numel(), 0.0f));
    }
    CHECK(category_bytes(MemoryCategory::Gradient) - gradient_bytes_before == parameter_bytes);
  }
}

TEST_CASE("state_dict and load_state_dict round-trip values into the same handles", "[nn]") {
  mg::Generator first_generator(1), second_generator(2);
  auto source = make_mlp(&first_generator);
  auto target = make_mlp(&second_generator);
  std::vector<Tensor> handles = target->parameters();
  CHECK(handles[0].to_vector<float>() != source->parameters()[0].to_vector<float>());

  mg::nn::NamedTensors state = source->state_dict();
  REQUIRE(state.size() == 6);
  for (const auto& [name, tensor] : state) CHECK_FALSE(tensor.requires_grad());
  // Detached, yet the same bytes: no copy is made to save a model.
  CHECK(state[0].second.storage() == source->parameters()[0].storage());

  target->load_state_dict(state);
  std::vector<Tensor> after = target->parameters();
  for (size_t i = 0; i < handles.size(); ++i) {
    CHECK(after[i].is_same(handles[i]));
    CHECK(handles[i].requires_grad());
    CHECK(handles[i].to_vector<float>() == state[i].second.to_vector<float>());
  }
}

TEST_CASE("load_state_dict names missing and unexpected keys and mismatches", "[nn]") {
  auto model = std::make_shared<Sequential>();
  model->push_back("fc1", std::make_shared<Linear>(784, 512));
  auto fc1 = std::static_pointer_cast<Linear>((*model)[0]);
  std::vector<float> weight_before = fc1->weight.to_vector<float>();
  std::vector<float> bias_before = fc1->bias.to_vector<float>();
  auto state_with = [&](Tensor weight) {
    return mg::nn::NamedTensors{{"fc1.weight", weight}, {"fc1.bias", mg::zeros({512})}};
  };

  CHECK_THROWS_WITH(model->load_state_dict(state_with(mg::zeros({512, 10}))),
                    "load_state_dict: fc1.weight has shape [512, 784] in the model but [512, 10] in the state");
  CHECK_THROWS_WITH(model->load_state_dict(state_with(mg::zeros({512, 784}, {.dtype = DType::Float64}))),
                    Catch::StartsWith("load_state_dict: fc1.weight has dtype float32 in the model but "
                                      "float64 in the state"));
  // Nothing was copied: the valid bias in those states was not loaded either.
  CHECK(fc1->weight.to_vector<float>() == weight_before);
  CHECK(fc1->bias.to_vector<float>() == bias_before);

  mg::nn::NamedTensors missing = {{"fc1.weight", mg::zeros({512, 784})}};
  CHECK_THROWS_WITH(model->load_state_dict(missing),
                    Catch::Contains("missing key(s) fc1.bias (in the model but not in the state)") &&
                        Catch::Contains("strict=*/false"));
  mg::nn::NamedTensors unexpected = state_with(mg::zeros({512, 784}));
  unexpected.emplace_back("fc2.weight", mg::zeros({10, 512}));
  CHECK_THROWS_WITH(model->load_state_dict(unexpected),
                    Catch::Contains("unexpected key(s) fc2.weight (in the state but not in the model)"));
  CHECK(fc1->weight.to_vector<float>() == weight_before);

  // Not strict: the keys both have are loaded, the others skipped.
  missing.emplace_back("fc2.weight", mg::zeros({10, 512}));
  model->load_state_dict(missing, /*strict=*/false);
  CHECK(fc1->weight.to_vector<float>() == std::vector<float>(512 * 784, 0.0f));
  CHECK(fc1->bias.to_vector<float>() == bias_before);
}

TEST_CASE("to(dtype) converts in place: old handles see the new dtype, grads move too", "[nn]") {
  auto net = std::make_shared<Net>();
  Tensor weight = net->head->weight;  // taken before the move
  std::vector<float> values = weight.to_vector<float>();
  run_backward(*net, 4);
  int64_t count = net->num_parameters() + 1;  // + the buffer
  int64_t parameter_bytes_before = category_bytes(MemoryCategory::Parameter);
  int64_t gradient_bytes_before = category_bytes(MemoryCategory::Gradient);

  net->to(DType::Float64);
  CHECK(weight.dtype() == DType::Float64);
  CHECK(weight.memory_category() == MemoryCategory::Parameter);
  CHECK(weight.requires_grad());
  std::vector<double> converted = weight.to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i) CHECK(converted[i] == static_cast<double>(values[i]));
  CHECK(net->scale.dtype() == DType::Float64);
  for (const Tensor& parameter : net->parameters()) {
    CHECK(parameter.grad().dtype() == DType::Float64);
    CHECK(parameter.grad().memory_category() == MemoryCategory::Gradient);
  }
  CHECK(category_bytes(MemoryCategory::Parameter) - parameter_bytes_before == count * 4);
  CHECK(category_bytes(MemoryCategory::Gradient) - gradient_bytes_before == (count - 1) * 4);

  // The model trains in float64 from here on; gradients accumulate into the moved ones.
  run_backward(*net, 4, DType::Float64);
  CHECK(weight.grad().dtype() == DType::Float64);

  CHECK_THROWS_WITH(net->to(DType::Int64), Catch::Contains("Net.to(int64)") && Catch::Contains("floating"));
}

TEST_CASE("to(memory_format) lays 4-D parameters out channels_last in place, grads too", "[nn]") {
  const MemoryFormat kLast = MemoryFormat::ChannelsLast;
  auto model = std::make_shared<Sequential>(std::make_shared<Conv2d>(3, 8, 3), std::make_shared<BatchNorm2d>(8),
                                            std::make_shared<Linear>(8, 4));
  Tensor conv_weight = model->parameters()[0];  // handles taken before the change
  REQUIRE(conv_weight.sizes() == mg::Shape{8, 3, 3, 3});
  std::vector<Tensor> others = model->parameters();
  others.erase(others.begin());
  for (const Tensor& buffer : model->buffers()) others.push_back(buffer);
  std::vector<float> values = conv_weight.to_vector<float>();
  mg::Generator generator(7);
  Tensor grad = mg::randn(conv_weight.sizes(), {}, &generator);
  conv_weight.set_grad(grad);
  std::vector<float> grad_values = grad.to_vector<float>();

  model->to(kLast);
  CHECK(!conv_weight.is_contiguous());
  CHECK(mg::is_contiguous_in(conv_weight, kLast));
  CHECK(conv_weight.to_vector<float>() == values);
  CHECK(conv_weight.requires_grad());
  CHECK(conv_weight.memory_category() == MemoryCategory::Parameter);
  CHECK(mg::is_contiguous_in(conv_weight.grad(), kLast));
  CHECK(conv_weight.grad().to_vector<float>() == grad_values);
  CHECK(conv_weight.grad().memory_category() == MemoryCategory::Gradient);
  for (const Tensor& other : others) CHECK(other.is_contiguous());  // 1-D and 2-D tensors stay

  model->to(MemoryFormat::Contiguous);
  CHECK(conv_weight.is_contiguous());
  CHECK(conv_weight.to_vector<float>() == values);
  CHECK(conv_weight.grad().is_contiguous());
}

TEST_CASE("to(device) moves the bytes to the other device's allocator", "[nn]") {
  auto mlp = make_mlp();
  Tensor weight = mlp->parameters()[0];
  int64_t cpu_before = category_bytes(MemoryCategory::Parameter);
  int64_t simulated_before = category_bytes(MemoryCategory::Parameter, Device::simulated());
  mlp->to(Device::simulated());
  CHECK(weight.device() == Device::simulated());
  CHECK(cpu_before - category_bytes(MemoryCategory::Parameter) == 535818 * 4);
  CHECK(category_bytes(MemoryCategory::Parameter, Device::simulated()) - simulated_before == 535818 * 4);
  mlp.reset();
  weight = Tensor();
  CHECK(category_bytes(MemoryCategory::Parameter, Device::simulated()) == simulated_before);
}

TEST_CASE("str() prints the module tree as PyTorch does", "[nn]") {
  Sequential model{std::make_shared<Linear>(784, 512), std::make_shared<ReLU>(),
                   std::make_shared<mg::nn::Dropout>(0.2), std::make_shared<Linear>(512, 10, false)};
  CHECK(model.str() ==
        "Sequential(\n"
        "  (0): Linear(in_features=784, out_features=512, bias=true)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.2)\n"
        "  (3): Linear(in_features=512, out_features=10, bias=false)\n"
        ")");
  CHECK(Net().str() ==
        "Net(\n"
        "  (body): Sequential(\n"
        "    (0): Linear(in_features=4, out_features=3, bias=true)\n"
        "    (1): ReLU()\n"
        "    (2): Linear(in_features=3, out_features=2, bias=true)\n"
        "  )\n"
        "  (head): Linear(in_features=2, out_features=1, bias=true)\n"
        ")");
  CHECK(mg::nn::Flatten().str() == "Flatten(start_dim=1, end_dim=-1)");
  CHECK(Sequential().str() == "Sequential()");
}
