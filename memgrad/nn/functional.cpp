// nn/functional.cpp — Functional: forward is the function it was made from.
#include "memgrad/nn/functional.h"

namespace mg::nn {

Functional::Functional(Function function, std::string name)
    : Module("Functional"), function_(std::move(function)), name_(std::move(name)) {
  MG_CHECK(function_ != nullptr, "Functional", (name_.empty() ? "" : "(" + name_ + ")"),
           ": the function is empty. Hint: pass a lambda such as [](const mg::Tensor& x) { return mg::relu(x); }.");
}

Tensor Functional::forward(const Tensor& input) { return function_(input); }

}  // namespace mg::nn
