// nn/sequential.cpp — the chain of modules.
#include "memgrad/nn/sequential.h"

namespace mg::nn {

Sequential::Sequential() : Module("Sequential") {}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Sequential() {
  for (const std::shared_ptr<Module>& module : modules) push_back(module);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  push_back(std::to_string(modules_.size()), std::move(module));
}

void Sequential::push_back(std::string name, std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::move(name), std::move(module)));
}

// An empty Sequential is the identity, as in PyTorch.
Tensor Sequential::forward(const Tensor& input) {
  Tensor output = input;
  for (const std::shared_ptr<Module>& module : modules_) output = (*module)(output);
  return output;
}

const std::shared_ptr<Module>& Sequential::operator[](size_t index) const {
  MG_CHECK(index < modules_.size(), "Sequential: index ", index, " is out of range for a Sequential of ",
           modules_.size(), " module(s)");
  return modules_[index];
}

}  // namespace mg::nn
