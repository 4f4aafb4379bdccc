// cuda/kernels/multinomial.cu — PLACEHOLDER written by the lead so the tree links; its owner replaces it whole.
#include "cuda/kernels/cuda_kernels.h"
#include "core/error.h"

namespace mg::cuda {

void multinomial(const Tensor&, int64_t, bool, PhiloxState, const Tensor&) { MG_CHECK(false, "cuda/kernels/multinomial.cu: not implemented yet"); }

}  // namespace mg::cuda
