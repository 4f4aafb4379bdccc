// nn/container.cpp — the module list.
#include "memgrad/nn/container.h"

#include <string>

namespace mg::nn {

ModuleList::ModuleList() : Module("ModuleList") {}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) : ModuleList() {
  for (const std::shared_ptr<Module>& module : modules) push_back(module);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  MG_CHECK(module != nullptr, "ModuleList.push_back: the module at index ", modules_.size(),
           " is null; create it with std::make_shared first");
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t index) const {
  MG_CHECK(index < modules_.size(), "ModuleList: index ", index, " is out of range for a ModuleList of ",
           modules_.size(), " module(s)");
  return modules_[index];
}

}  // namespace mg::nn
