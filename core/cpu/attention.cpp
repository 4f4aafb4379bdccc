// core/cpu/attention.cpp — PLACEHOLDER written by the lead so the tree links; its owner replaces it whole.
#include "core/cpu/cpu_kernels.h"
#include "core/error.h"

namespace mg::cpu {

void attention_forward(const Tensor&, const Tensor&, const Tensor&, const AttentionParams&, const Tensor&, const Tensor&) { MG_CHECK(false, "core/cpu/attention.cpp: not implemented yet"); }
void attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttentionParams&, const Tensor&, const Tensor&, const Tensor&) { MG_CHECK(false, "core/cpu/attention.cpp: not implemented yet"); }

}  // namespace mg::cpu
