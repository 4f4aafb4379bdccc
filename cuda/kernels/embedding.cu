// cuda/kernels/embedding.cu — PLACEHOLDER written by the lead so the tree links; its owner replaces it whole.
#include "cuda/kernels/cuda_kernels.h"
#include "core/error.h"

namespace mg::cuda {

void embedding(const Tensor&, const Tensor&, const Tensor&) { MG_CHECK(false, "cuda/kernels/embedding.cu: not implemented yet"); }
void embedding_backward(const Tensor&, const Tensor&, int64_t, const Tensor&) { MG_CHECK(false, "cuda/kernels/embedding.cu: not implemented yet"); }

}  // namespace mg::cuda
