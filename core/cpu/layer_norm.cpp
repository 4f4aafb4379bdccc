// core/cpu/layer_norm.cpp — PLACEHOLDER written by the lead so the tree links; its owner replaces it whole.
#include "core/cpu/cpu_kernels.h"
#include "core/error.h"

namespace mg::cpu {

void layer_norm(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&, const Tensor&, const Tensor&) { MG_CHECK(false, "core/cpu/layer_norm.cpp: not implemented yet"); }
void layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) { MG_CHECK(false, "core/cpu/layer_norm.cpp: not implemented yet"); }

}  // namespace mg::cpu
