// nn/container.h — ModuleList: a list of submodules registered as "0", "1", ... with no
// forward of its own (the owner decides how to call them), PyTorch's nn.ModuleList.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <vector>

#include "memgrad/nn/module.h"

namespace mg::nn {

class ModuleList : public Module {
 public:
  ModuleList();
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);

  // Appends a module named by its position ("0", "1", ...), so its tensors appear in
  // state_dict as "<list>.<index>.<name>".
  void push_back(std::shared_ptr<Module> module);

  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;

  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  // The children in order, beside the registered ones, for indexing and iteration.
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace mg::nn
