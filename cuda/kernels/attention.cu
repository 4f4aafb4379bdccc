// cuda/kernels/attention.cu — PLACEHOLDER written by the lead so the tree links; its owner replaces it whole.
#include "cuda/kernels/cuda_kernels.h"
#include "core/error.h"

namespace mg::cuda {

void attention_forward(const Tensor&, const Tensor&, const Tensor&, const AttentionParams&, const Tensor&, const Tensor&) { MG_CHECK(false, "cuda/kernels/attention.cu: not implemented yet"); }
void attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttentionParams&, const Tensor&, const Tensor&, const Tensor&) { MG_CHECK(false, "cuda/kernels/attention.cu: not implemented yet"); }

}  // namespace mg::cuda
