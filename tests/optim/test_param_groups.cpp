// tests/optim/test_param_groups.cpp — the weight-decay rule on a GPT-shaped module tree
// (which names land in which group, the rule's two choices, frozen parameters) and on
// nn::GPT itself (nanoGPT's counts, the tied head listed once), AdamW
// built from the groups (each group's options, and a step that shrinks exactly the decayed
// tensors by 1 - lr * weight_decay), and the errors for names that match nothing.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/nn/gpt.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/module.h"
#include "memgrad/optim/adam.h"
#include "memgrad/optim/param_groups.h"

using namespace mg;
using Catch::Matchers::Contains;
using Names = std::vector<std::string>;

namespace {

// A module that exposes registration to the tests.
class Open : public nn::Module {
 public:
  Open() : Module("Open") {}
  using Module::register_module;
  using Module::register_parameter;
};

// A LayerNorm's parameters: weight and bias of shape (features).
std::shared_ptr<Open> norm(int64_t features) {
  auto module = std::make_shared<Open>();
  module->register_parameter("weight", ones({features}));
  module->register_parameter("bias", zeros({features}));
  return module;
}

// A table of `rows` embeddings of `features` values.
std::shared_ptr<Open> table(int64_t rows, int64_t features) {
  auto module = std::make_shared<Open>();
  module->register_parameter("weight", randn({rows, features}));
  return module;
}

// One block of GPT-2 under GPT-2's names, with C = 4 features.
std::shared_ptr<Open> block() {
  auto attn = std::make_shared<Open>();
  attn->register_module("c_attn", std::make_shared<nn::Linear>(4, 12));
  attn->register_module("c_proj", std::make_shared<nn::Linear>(4, 4));
  auto mlp = std::make_shared<Open>();
  mlp->register_module("c_fc", std::make_shared<nn::Linear>(4, 16));
  mlp->register_module("c_proj", std::make_shared<nn::Linear>(16, 4));
  auto module = std::make_shared<Open>();
  module->register_module("ln_1", norm(4));
  module->register_module("attn", attn);
  module->register_module("ln_2", norm(4));
  module->register_module("mlp", mlp);
  return module;
}

// transformer.{wte, wpe, h.0, h.1, ln_f}, and a frozen tensor no group may hold.
std::shared_ptr<Open> gpt_shaped() {
  auto layers = std::make_shared<Open>();
  layers->register_module("0", block());
  layers->register_module("1", block());
  auto transformer = std::make_shared<Open>();
  transformer->register_module("wte", table(10, 4));
  transformer->register_module("wpe", table(8, 4));
  transformer->register_module("h", layers);
  transformer->register_module("ln_f", norm(4));
  auto model = std::make_shared<Open>();
  model->register_module("transformer", transformer);
  model->register_parameter("frozen_scale", ones({4, 4}), /*requires_grad=*/false);
  return model;
}

Names names_of(const nn::NamedTensors& named) {
  Names names;
  for (const auto& [name, tensor] : named) names.push_back(name);
  return names;
}

Names block_names(const std::string& prefix, bool matrices) {
  if (matrices) {
    return {prefix + "attn.c_attn.weight", prefix + "attn.c_proj.weight", prefix + "mlp.c_fc.weight",
            prefix + "mlp.c_proj.weight"};
  }
  return {prefix + "ln_1.weight",        prefix + "ln_1.bias",      prefix + "attn.c_attn.bias",
          prefix + "attn.c_proj.bias",   prefix + "ln_2.weight",    prefix + "ln_2.bias",
          prefix + "mlp.c_fc.bias",      prefix + "mlp.c_proj.bias"};
}

Names concat(std::vector<Names> parts) {
  Names all;
  for (const Names& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

}  // namespace

TEST_CASE("weight decay: matrices decay, biases and norms do not, frozen tensors are left out", "[optim][param_groups]") {
  auto model = gpt_shaped();
  optim::WeightDecaySplit split = optim::split_by_weight_decay(model->named_parameters());
  CHECK(names_of(split.decay) == concat({{"transformer.wte.weight", "transformer.wpe.weight"},
                                         block_names("transformer.h.0.", true),
                                         block_names("transformer.h.1.", true)}));
  CHECK(names_of(split.no_decay) == concat({block_names("transformer.h.0.", false),
                                            block_names("transformer.h.1.", false),
                                            {"transformer.ln_f.weight", "transformer.ln_f.bias"}}));
  // The split holds the model's own tensors, not copies.
  const nn::NamedTensors all = model->named_parameters();
  REQUIRE(all[1].first == "transformer.wte.weight");  // after the root's own frozen_scale
  CHECK(split.decay.front().second.impl() == all[1].second.impl());
}

TEST_CASE("weight decay: the positional table and listed names can be kept out of decay", "[optim][param_groups]") {
  auto model = gpt_shaped();
  optim::WeightDecayRule rule{.decay_position_embedding = false, .no_decay = {"wte.weight", "h.1.mlp.c_fc.weight"}};
  optim::WeightDecaySplit split = optim::split_by_weight_decay(model->named_parameters(), rule);
  CHECK(names_of(split.decay) == concat({block_names("transformer.h.0.", true),
                                         {"transformer.h.1.attn.c_attn.weight", "transformer.h.1.attn.c_proj.weight",
                                          "transformer.h.1.mlp.c_proj.weight"}}));
  Names no_decay = names_of(split.no_decay);
  CHECK(no_decay.size() == 2 * 8 + 2 + 3);
  CHECK(no_decay[0] == "transformer.wte.weight");  // in the model's order
  CHECK(no_decay[1] == "transformer.wpe.weight");
  // After h.1's ln_1 (2), attention biases (2) and ln_2 (2).
  CHECK(no_decay[2 + 8 + 6] == "transformer.h.1.mlp.c_fc.weight");

  // A dotted suffix, not any suffix: "pe.weight" names no parameter.
  CHECK_THROWS_WITH(optim::split_by_weight_decay(model->named_parameters(), {.no_decay = {"pe.weight"}}),
                    Contains("no_decay names \"pe.weight\"") && Contains("no trainable parameter"));
}

TEST_CASE("weight decay: names that match nothing and models without parameters are refused", "[optim][param_groups]") {
  auto model = gpt_shaped();
  CHECK_THROWS_WITH(optim::split_by_weight_decay(model->named_parameters(), {.no_decay = {"lm_head.weight"}}),
                    Contains("\"lm_head.weight\"") && Contains("model.named_parameters()"));
  // The frozen tensor is no trainable parameter either.
  CHECK_THROWS_WITH(optim::split_by_weight_decay(model->named_parameters(), {.no_decay = {"frozen_scale"}}),
                    Contains("\"frozen_scale\""));
  CHECK_THROWS_WITH(optim::split_by_weight_decay(model->named_parameters(),
                                                 {.decay_position_embedding = false, .position_embedding = "pos.weight"}),
                    Contains("decay_position_embedding is false") && Contains("\"pos.weight\""));
  auto frozen_only = std::make_shared<Open>();
  frozen_only->register_parameter("w", ones({2, 2}), /*requires_grad=*/false);
  CHECK_THROWS_WITH(optim::split_by_weight_decay(frozen_only->named_parameters()),
                    Contains("no trainable parameters"));
  CHECK_THROWS_WITH(optim::AdamW(std::vector<optim::ParamGroupOptions<optim::AdamWOptions>>{}),
                    Contains("AdamW got no parameter groups"));
}

TEST_CASE("weight_decay_groups: two groups with the options, the second without decay", "[optim][param_groups]") {
  auto model = gpt_shaped();
  optim::AdamWOptions options{.lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  auto groups = optim::weight_decay_groups(*model, options);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].params.size() == 2 + 2 * 4);
  CHECK(groups[1].params.size() == 2 * 8 + 2);
  CHECK(groups[0].options.weight_decay == 0.1);
  CHECK(groups[1].options.weight_decay == 0.0);
  CHECK(groups[1].options.beta2 == 0.95);
  CHECK(groups[1].options.lr == 6e-4);

  optim::AdamW optimizer(groups);
  REQUIRE(optimizer.param_groups().size() == 2);
  CHECK(optimizer.param_groups()[0].lr == 6e-4);
  CHECK(optimizer.hyper_parameters(0) == optim::AdamW({ones({1}).requires_grad_()}, options).hyper_parameters(0));
  auto hyper = optimizer.hyper_parameters(1);
  CHECK(hyper[3] == std::pair<std::string, double>{"weight_decay", 0.0});
  CHECK(hyper[1] == std::pair<std::string, double>{"beta2", 0.95});

  // A model of matrices only: one group.
  auto matrices = std::make_shared<Open>();
  matrices->register_parameter("w", ones({2, 3}));
  CHECK(optim::weight_decay_groups(*matrices, options).size() == 1);
}

TEST_CASE("AdamW from weight_decay_groups shrinks exactly the decayed tensors", "[optim][param_groups]") {
  auto model = gpt_shaped();
  model->to(DType::Float64);
  const double lr = 0.01, weight_decay = 0.1;
  optim::AdamW optimizer(optim::weight_decay_groups(*model, optim::AdamWOptions{.lr = lr, .weight_decay = weight_decay}));
  optim::WeightDecaySplit split = optim::split_by_weight_decay(model->named_parameters());
  std::vector<std::vector<double>> decay_before, no_decay_before;
  for (const auto& [name, param] : split.decay) decay_before.push_back(param.to_vector<double>());
  for (const auto& [name, param] : split.no_decay) no_decay_before.push_back(param.to_vector<double>());
  // Zero gradients: Adam's moments stay zero and its step is 0 / (0 + eps) = 0, so only the
  // decoupled decay moves a parameter.
  for (const Tensor& param : model->parameters()) {
    if (param.requires_grad()) param.set_grad(zeros(param.sizes(), {.dtype = DType::Float64}));
  }
  optimizer.step();
  for (size_t i = 0; i < split.decay.size(); ++i) {
    INFO(split.decay[i].first);
    std::vector<double> after = split.decay[i].second.to_vector<double>();
    for (size_t j = 0; j < after.size(); ++j) CHECK(after[j] == decay_before[i][j] * (1 - lr * weight_decay));
  }
  for (size_t i = 0; i < split.no_decay.size(); ++i) {
    INFO(split.no_decay[i].first);
    CHECK(split.no_decay[i].second.to_vector<double>() == no_decay_before[i]);
  }
}

TEST_CASE("weight_decay_groups on nn::GPT: nanoGPT's split, the tied head once", "[optim][param_groups]") {
  nn::GPT model(nn::GPTOptions{.n_layer = 3, .n_head = 2, .n_embd = 8, .block_size = 6, .vocab_size = 11});
  auto groups = optim::weight_decay_groups(model, optim::AdamWOptions{.weight_decay = 0.1});
  REQUIRE(groups.size() == 2);
  // As nanoGPT counts GPT-2 124M's (50 decayed tensors, 98 not): wte, wpe and four
  // matrices a block; ln_1, ln_2 and four biases a block (two tensors each), and ln_f.
  CHECK(groups[0].params.size() == 2 + 4 * 3);
  CHECK(groups[1].params.size() == 8 * 3 + 2);
  int64_t elements = 0;
  for (const auto& group : groups) {
    for (const Tensor& param : group.params) elements += param.numel();
  }
  CHECK(elements == model.num_parameters());  // the tied table once, nothing left out
  CHECK(groups[0].params[0].impl() == model.lm_head->weight.impl());
}
