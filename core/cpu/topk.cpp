// core/cpu/topk.cpp — PLACEHOLDER written by the lead so the tree links; its owner replaces it whole.
#include "core/cpu/cpu_kernels.h"
#include "core/error.h"

namespace mg::cpu {

void topk(const Tensor&, int64_t, bool, const Tensor&, const Tensor&) { MG_CHECK(false, "core/cpu/topk.cpp: not implemented yet"); }

}  // namespace mg::cpu
