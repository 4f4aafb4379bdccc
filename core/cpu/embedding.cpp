// core/cpu/embedding.cpp — PLACEHOLDER written by the lead so the tree links; its owner replaces it whole.
#include "core/cpu/cpu_kernels.h"
#include "core/error.h"

namespace mg::cpu {

void embedding(const Tensor&, const Tensor&, const Tensor&) { MG_CHECK(false, "core/cpu/embedding.cpp: not implemented yet"); }
void embedding_backward(const Tensor&, const Tensor&, int64_t, const Tensor&) { MG_CHECK(false, "core/cpu/embedding.cpp: not implemented yet"); }

}  // namespace mg::cpu
