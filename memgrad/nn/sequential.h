// nn/sequential.h — Sequential: modules applied one after another, each output the next
// one's input.
#pragma once

#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/nn/module.h"

namespace mg::nn {

class Sequential : public Module {
 public:
  Sequential();
  // Sequential{linear, relu, ...}; the modules are named "0", "1", ...
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  // std::make_shared<Sequential>(linear, relu, ...), which cannot forward a braced list.
  template <class... Modules>
    requires(sizeof...(Modules) > 0 && (std::derived_from<Modules, Module> && ...))
  explicit Sequential(std::shared_ptr<Modules>... modules) : Sequential() {
    (push_back(std::move(modules)), ...);
  }

  // Appends a module named by its position ("0", "1", ...) or by `name`.
  void push_back(std::shared_ptr<Module> module);
  void push_back(std::string name, std::shared_ptr<Module> module);

  Tensor forward(const Tensor& input) override;

  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;

 private:
  // The children in order, kept beside the registered ones so forward walks a plain vector.
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace mg::nn
