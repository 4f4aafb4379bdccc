// nn/module.h — Module: the base of every layer and model. A module owns named parameters
// (trained tensors), buffers (other model state) and submodules, and knows how to walk,
// move, save, load and print that tree.
//
// Memory: registering a tensor tags its storage PARAMETER, so a model's bytes show up under
// that category from the moment it is built; zero_grad() frees GRADIENT memory by default.
//
// Modules are held by std::shared_ptr (std::make_shared<mg::nn::Linear>(784, 512)): a
// submodule may be shared by two parents, and handles to it stay valid as long as anyone
// uses them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "memgrad/core/memory_format.h"
#include "memgrad/core/tensor.h"

namespace mg::nn {

// Tensors under their dotted names ("0.weight", "fc1.bias"), in registration order.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name);
  virtual ~Module();
  // NOTE: not copyable: a copy would share the tensors yet look like an independent model.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The computation. The default throws: modules that take other inputs (losses take
  // (input, target)) or none declare their own.
  virtual Tensor forward(const Tensor& input);
  // forward(), named for a running memory::Recorder and for anomaly mode: the module path
  // gains this module's name in its caller's children ("layer1" then "layer1.0.conv1"), and
  // a call outside any phase is the forward phase. Layers call their children this way, not
  // through forward(), so that paths nest.
  Tensor operator()(const Tensor& input) {
    NamedCall call(*this);
    return forward(input);
  }

  // Depth-first, in registration order, own tensors before the submodules'. A tensor shared
  // by two modules is listed once (under its first name), as in PyTorch, so an optimizer
  // updates it once.
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  // Direct submodules only.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // This module (named "") and every submodule, pre-order, each once. Needs this module to
  // be held by a std::shared_ptr.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules() const;

  // Training mode (the default) or evaluation mode, for this module and every submodule;
  // layers such as Dropout behave differently in each.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Move every parameter and buffer, in place: handles taken before (Linear::weight, an
  // optimizer's list) see the new device or dtype. The storage stays PARAMETER and a
  // parameter's .grad moves with it. to(dtype) converts floating tensors only (integer
  // buffers such as counters keep their type).
  void to(Device device);
  void to(DType dtype);
  // Lays every 4-D parameter and buffer (convolution weights) out in `format`, in place and
  // with its .grad, as PyTorch's model.to(memory_format=torch.channels_last): with
  // ChannelsLast, convolutions read weights in the layout their channels-last kernels
  // want. Other tensors are left as they are.
  void to(MemoryFormat format);

  // set_to_none (the default) drops every .grad, returning its GRADIENT memory; otherwise
  // the gradients are kept and filled with zeros.
  void zero_grad(bool set_to_none = true);

  // Parameters and buffers under dotted names, module by module (own parameters, own
  // buffers, then each submodule's), detached from autograd but sharing their storage.
  NamedTensors state_dict() const;
  // Copies the values of `state` into the tensors of the same names, in place (handles stay
  // valid). Every key, shape and dtype is checked before anything is copied, so a failed
  // load changes nothing. strict: the keys must match exactly; otherwise keys missing on
  // either side are skipped.
  void load_state_dict(const NamedTensors& state, bool strict = true);

  // Elements in all parameters (each shared parameter counted once).
  int64_t num_parameters() const;

  const std::string& type_name() const { return type_name_; }
  // The module tree, as PyTorch prints it:
  //   Sequential(
  //     (0): Linear(in_features=784, out_features=512, bias=true)
  //     (1): ReLU()
  //   )
  std::string str() const;
  // What goes between the parentheses of this module's line ("in_features=784, ...").
  virtual std::string extra_repr() const { return ""; }

 protected:
  // While alive, this module's call is named as operator() names forward(); a layer's other
  // entry points (BatchNorm2d::forward_relu) open one too. Costs nothing unless a
  // memory::Recorder runs or anomaly mode is on (memory/context.h).
  class NamedCall {
   public:
    explicit NamedCall(const Module& module);
    ~NamedCall();
    NamedCall(const NamedCall&) = delete;
    NamedCall& operator=(const NamedCall&) = delete;

   private:
    struct Scopes;
    std::unique_ptr<Scopes> scopes_;  // null when nothing reads the context
  };

  // Makes `tensor` a parameter named `name` (no '.', not yet used by a parameter, buffer or
  // submodule): tags its storage PARAMETER, sets requires_grad, and returns the handle.
  Tensor register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  // Model state that is not trained (e.g. running statistics). Its storage is tagged
  // PARAMETER too: buffers are part of the model, saved in state_dict and moved by to(),
  // and a memory report should count them with the weights rather than as temporaries.
  Tensor register_buffer(std::string name, Tensor tensor);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }

 private:
  void check_new_name(const std::string& name, const char* what) const;
  void add_child(std::string name, std::shared_ptr<Module> module);
  // This module and its submodules under their dotted prefixes, pre-order, each once.
  void collect_modules(const std::string& prefix, std::unordered_set<const Module*>& seen,
                       std::vector<std::pair<std::string, const Module*>>& out) const;
  // The tensors of `member` (parameters_ or buffers_) of this module or of the whole tree.
  NamedTensors collect_tensors(NamedTensors Module::*member, bool recurse) const;
  void append_state(const std::string& prefix, NamedTensors& out) const;
  // Every parameter and buffer of the tree, each once.
  std::vector<Tensor> all_state_tensors() const;

  std::string type_name_;
  bool training_ = true;
  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Writes the module's state_dict() to a safetensors file (atomically: an earlier file at
// `path` survives a failed save), tagged {"format": "pt"} so that PyTorch's
// safetensors.torch.load_file reads it too.
void save(const Module& module, const std::string& path);
// Reads a safetensors file and load_state_dict()s it into `module` (see there for `strict`);
// a file that does not fit the model changes nothing.
void load(Module& module, const std::string& path, bool strict = true);

}  // namespace mg::nn
