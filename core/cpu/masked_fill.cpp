// core/cpu/masked_fill.cpp — PLACEHOLDER written by the lead so the tree links; its owner replaces it whole.
#include "core/cpu/cpu_kernels.h"
#include "core/error.h"

namespace mg::cpu {

void masked_fill(const Tensor&, const Tensor&, double, const Tensor&) { MG_CHECK(false, "core/cpu/masked_fill.cpp: not implemented yet"); }

}  // namespace mg::cpu
