// core/cpu/multinomial.cpp — PLACEHOLDER written by the lead so the tree links; its owner replaces it whole.
#include "core/cpu/cpu_kernels.h"
#include "core/error.h"

namespace mg::cpu {

void multinomial(const Tensor&, int64_t, bool, PhiloxState, const Tensor&) { MG_CHECK(false, "core/cpu/multinomial.cpp: not implemented yet"); }

}  // namespace mg::cpu
