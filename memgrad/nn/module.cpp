// nn/module.cpp — the module tree: registration, traversal, moving, state_dict and printing.
#include "memgrad/nn/module.h"
#include "memgrad/nn/check_state_dict.h"

#include <optional>
#include <sstream>
#include <unordered_map>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/context.h"
#include "memgrad/io/safetensors.h"

namespace mg::nn {

namespace {

// Every line after the first indented by two spaces (PyTorch's _addindent), so a child's
// printout nests inside its parent's.
std::string indent_continuation_lines(const std::string& text) {
  std::string result;
  for (char c : text) {
    result += c;
    if (c == '\n') result += "  ";
  }
  return result;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string result;
  for (const std::string& key : keys) result += (result.empty() ? "" : ", ") + key;
  return result;
}

// Replaces a parameter or buffer's data (and its .grad's) in place with convert(data),
// through set_data, so that every handle to it sees the new storage.
template <class Convert>
void replace_data(const Tensor& tensor, Convert convert) {
  Tensor grad = tensor.grad();
  // Convert before replacing: the old bytes are freed only once nothing refers to them.
  Tensor replaced = convert(tensor);
  replaced.set_memory_category(MemoryCategory::Parameter);
  Tensor replaced_grad;
  if (grad.defined()) {
    replaced_grad = convert(grad);
    replaced_grad.set_memory_category(MemoryCategory::Gradient);
  }
  tensor.set_data(replaced);
  if (grad.defined()) tensor.set_grad(replaced_grad);
}

void move_tensor(const Tensor& tensor, DType dtype, Device device) {
  if (tensor.dtype() == dtype && tensor.device() == device) return;
  replace_data(tensor, [&](const Tensor& data) {
    // A channels_last weight stays channels_last on its new device or dtype (as in PyTorch).
    return converted_copy(data, dtype, device, false, suggest_memory_format(data));
  });
}

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Module::~Module() = default;

struct Module::NamedCall::Scopes {
  std::optional<memory::ModuleScope> module;
  std::optional<memory::PhaseScope> phase;
  const Module* caller = nullptr;
};

Module::NamedCall::NamedCall(const Module& module) {
  if (!memory::detail::tracking()) return;
  scopes_ = std::make_unique<Scopes>();
  // The name this module has in its caller; a module called from outside any module (the
  // model itself) adds nothing, and one its caller does not own is named by its type.
  memory::detail::Context& context = memory::detail::current_context();
  const auto* caller = static_cast<const Module*>(context.calling_module);
  scopes_->caller = caller;
  std::string name;
  if (caller != nullptr) {
    name = module.type_name_;
    for (const auto& [child_name, child] : caller->children_) {
      if (child.get() == &module) name = child_name;
    }
  }
  if (!name.empty()) scopes_->module.emplace(name);
  if (memory::current_phase() == memory::Phase::Other) scopes_->phase.emplace(memory::Phase::Forward);
  context.calling_module = &module;
}

Module::NamedCall::~NamedCall() {
  if (scopes_) memory::detail::current_context().calling_module = scopes_->caller;
}

Tensor Module::forward(const Tensor& input) {
  throw Error(detail::str_cat(type_name_, " has no single-input forward. Hint: call the forward ",
                              "this module declares (a loss takes (input, target))."));
}

// ---- registration ----

void Module::check_new_name(const std::string& name, const char* what) const {
  MG_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_, ": cannot register ",
           what, " \"", name, "\": a name must be non-empty and contain no '.' (dots separate the ",
           "levels of nested modules in names such as \"fc1.weight\")");
  bool taken = false;
  for (const auto& entry : parameters_) taken = taken || entry.first == name;
  for (const auto& entry : buffers_) taken = taken || entry.first == name;
  for (const auto& entry : children_) taken = taken || entry.first == name;
  MG_CHECK(!taken, type_name_, ": cannot register ", what, " \"", name,
           "\": the module already has a parameter, buffer or submodule of that name");
}

Tensor Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  MG_CHECK(tensor.defined(), type_name_, ": cannot register parameter \"", name,
           "\": the tensor is undefined. Hint: leave an optional parameter unregistered.");
  MG_CHECK(tensor.is_leaf(), type_name_, ": cannot register parameter \"", name, "\" (shape ",
           tensor.sizes(), "): it was computed by an op, and a parameter must be a leaf. ",
           "Hint: register x.detach().");
  tensor.set_memory_category(MemoryCategory::Parameter);
  tensor.requires_grad_(requires_grad);
  parameters_.emplace_back(std::move(name), tensor);
  return tensor;
}

Tensor Module::register_buffer(std::string name, Tensor tensor) {
  check_new_name(name, "buffer");
  MG_CHECK(tensor.defined(), type_name_, ": cannot register buffer \"", name,
           "\": the tensor is undefined");
  tensor.set_memory_category(MemoryCategory::Parameter);
  buffers_.emplace_back(std::move(name), tensor);
  return tensor;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name, "submodule");
  MG_CHECK(module != nullptr, type_name_, ": cannot register submodule \"", name,
           "\": the pointer is null");
  children_.emplace_back(std::move(name), std::move(module));
}

// ---- traversal ----

void Module::collect_modules(const std::string& prefix, std::unordered_set<const Module*>& seen,
                             std::vector<std::pair<std::string, const Module*>>& out) const {
  if (!seen.insert(this).second) return;
  out.emplace_back(prefix, this);
  for (const auto& [name, child] : children_) {
    child->collect_modules(prefix.empty() ? name : prefix + "." + name, seen, out);
  }
}

NamedTensors Module::collect_tensors(NamedTensors Module::*member, bool recurse) const {
  std::vector<std::pair<std::string, const Module*>> modules;
  std::unordered_set<const Module*> seen_modules;
  if (recurse) {
    collect_modules("", seen_modules, modules);
  } else {
    modules.emplace_back("", this);
  }
  NamedTensors result;
  std::unordered_set<const TensorImpl*> seen_tensors;
  for (const auto& [prefix, module] : modules) {
    for (const auto& [name, tensor] : module->*member) {
      if (!seen_tensors.insert(tensor.impl()).second) continue;
      result.emplace_back(prefix.empty() ? name : prefix + "." + name, tensor);
    }
  }
  return result;
}

NamedTensors Module::named_parameters(bool recurse) const {
  return collect_tensors(&Module::parameters_, recurse);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> result;
  for (auto& entry : named_parameters(recurse)) result.push_back(std::move(entry.second));
  return result;
}

NamedTensors Module::named_buffers(bool recurse) const {
  return collect_tensors(&Module::buffers_, recurse);
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> result;
  for (auto& entry : named_buffers(recurse)) result.push_back(std::move(entry.second));
  return result;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::shared_ptr<const Module> self = weak_from_this().lock();
  MG_CHECK(self != nullptr, type_name_, ": named_modules() needs the module to be held by a ",
           "std::shared_ptr. Hint: create it with std::make_shared<", type_name_, ">(...).");
  std::vector<std::pair<std::string, const Module*>> modules;
  std::unordered_set<const Module*> seen;
  collect_modules("", seen, modules);
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> result;
  result.reserve(modules.size());
  for (const auto& [name, module] : modules) {
    // Submodules are always held by shared_ptr (register_module takes one), so
    // shared_from_this() cannot fail; the modules are ours to hand out as mutable.
    result.emplace_back(name, std::const_pointer_cast<Module>(module->shared_from_this()));
  }
  return result;
}

std::vector<Tensor> Module::all_state_tensors() const {
  std::vector<Tensor> tensors = parameters();
  for (Tensor& buffer : buffers()) tensors.push_back(std::move(buffer));
  return tensors;
}

// ---- mode, device, gradients ----

void Module::train(bool on) {
  training_ = on;
  for (const auto& entry : children_) entry.second->train(on);
}

void Module::to(Device device) {
  for (const Tensor& tensor : all_state_tensors()) move_tensor(tensor, tensor.dtype(), device);
}

void Module::to(MemoryFormat format) {
  for (const Tensor& tensor : all_state_tensors()) {
    if (tensor.dim() != 4 || is_contiguous_in(tensor, format)) continue;
    replace_data(tensor, [&](const Tensor& data) { return contiguous_copy(data, format); });
  }
}

void Module::to(DType dtype) {
  MG_CHECK(is_floating(dtype), type_name_, ".to(", dtype, "): a module can only be converted to ",
           "a floating dtype (its integer buffers keep their type). Hint: use float32, float64, ",
           "float16 or bfloat16.");
  for (const Tensor& tensor : all_state_tensors()) {
    if (is_floating(tensor.dtype())) move_tensor(tensor, dtype, tensor.device());
  }
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& parameter : parameters()) {
    Tensor grad = parameter.grad();
    if (!grad.defined()) continue;
    if (set_to_none) {
      parameter.set_grad(Tensor());
    } else {
      grad.zero_();
    }
  }
}

int64_t Module::num_parameters() const {
  int64_t count = 0;
  for (const Tensor& parameter : parameters()) count += parameter.numel();
  return count;
}

// ---- state_dict ----

void Module::append_state(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, tensor] : parameters_) out.emplace_back(prefix + name, tensor.detach());
  for (const auto& [name, tensor] : buffers_) out.emplace_back(prefix + name, tensor.detach());
  for (const auto& [name, child] : children_) child->append_state(prefix + name + ".", out);
}

NamedTensors Module::state_dict() const {
  NamedTensors state;
  append_state("", state);
  return state;
}

namespace {

// The pairs (model tensor, state tensor) that load_state_dict copies, after checking every
// key, shape and dtype of `state` against `model_state`: throws, naming each problem, when
// `state` does not fit.
std::vector<std::pair<Tensor, const Tensor*>> checked_copies(const NamedTensors& model_state,
                                                             const NamedTensors& state, bool strict) {
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [name, tensor] : state) {
    MG_CHECK(given.emplace(name, &tensor).second, "load_state_dict: the state holds key ", name,
             " twice");
    MG_CHECK(tensor.defined(), "load_state_dict: the state's tensor for key ", name, " is undefined");
  }

  std::vector<std::string> problems, missing;
  std::string hint;
  std::vector<std::pair<Tensor, const Tensor*>> copies;  // (model tensor, state tensor)
  for (const auto& [name, target] : model_state) {
    auto found = given.find(name);
    if (found == given.end()) {
      missing.push_back(name);
      continue;
    }
    const Tensor& source = *found->second;
    given.erase(found);
    if (source.sizes() != target.sizes()) {
      problems.push_back(detail::str_cat(name, " has shape ", target.sizes(), " in the model but ",
                                         source.sizes(), " in the state"));
    } else if (source.dtype() != target.dtype()) {
      problems.push_back(detail::str_cat(name, " has dtype ", target.dtype(), " in the model but ",
                                         source.dtype(), " in the state. Hint: convert the model with ",
                                         "to(DType) or the state's tensor with .to(", target.dtype(), ")"));
    } else {
      copies.emplace_back(target, &source);
    }
  }
  if (strict) {
    std::vector<std::string> unexpected;
    for (const auto& [name, tensor] : state) {
      if (given.count(name)) unexpected.push_back(name);
    }
    if (!missing.empty()) {
      problems.push_back("missing key(s) " + join_keys(missing) + " (in the model but not in the state)");
    }
    if (!unexpected.empty()) {
      problems.push_back("unexpected key(s) " + join_keys(unexpected) +
                         " (in the state but not in the model)");
    }
    if (!missing.empty() || !unexpected.empty()) {
      hint = ". Hint: load_state_dict(state, /*strict=*/false) loads only the keys both have.";
    }
  }
  if (!problems.empty()) {
    std::string message = "load_state_dict: " + problems.front();
    for (size_t i = 1; i < problems.size(); ++i) message += "; " + problems[i];
    throw Error(message + hint);
  }

  return copies;
}

}  // namespace

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  // Check everything first, then copy: a failed load leaves the model as it was.
  const std::vector<std::pair<Tensor, const Tensor*>> copies = checked_copies(state_dict(), state, strict);
  NoGradGuard no_grad;
  for (const auto& [target, source] : copies) target.copy_(*source);
}

void check_state_dict(const Module& module, const NamedTensors& state, bool strict) {
  checked_copies(module.state_dict(), state, strict);
}

// ---- printing ----

std::string Module::str() const {
  std::vector<std::string> lines;
  std::istringstream extra(extra_repr());
  for (std::string line; std::getline(extra, line);) lines.push_back(line);
  bool single_line = children_.empty() && lines.size() <= 1;
  for (const auto& [name, child] : children_) {
    lines.push_back("(" + name + "): " + indent_continuation_lines(child->str()));
  }
  std::string result = type_name_ + "(";
  if (single_line) return result + (lines.empty() ? "" : lines.front()) + ")";
  for (const std::string& line : lines) result += "\n  " + line;
  return result + "\n)";
}

// ---- checkpoints ----

void save(const Module& module, const std::string& path) {
  save_safetensors(path, module.state_dict(), {{"format", "pt"}});
}

void load(Module& module, const std::string& path, bool strict) {
  NamedTensors model_state = module.state_dict();
  // Read straight onto the model's device, so the copy into the parameters stays there.
  Device device = model_state.empty() ? Device::cpu() : model_state.front().second.device();
  NamedTensors state = load_safetensors(path, device);
  try {
    module.load_state_dict(state, strict);
  } catch (const Error& error) {
    throw Error(detail::str_cat("loading '", path, "' into ", module.type_name(), ": ", error.what()));
  }
}

}  // namespace mg::nn
