// cuda/plan/blas_workspace.cpp — the size of cuBLAS's per-stream workspace (see the header).
#include "memgrad/cuda/plan/blas_workspace.h"

namespace mg::cuda {

size_t blas_workspace_bytes_for_capability(int compute_capability_major) {
  constexpr int kHopper = 9;
  return compute_capability_major >= kHopper ? size_t{32} << 20 : size_t{8} << 20;
}

}  // namespace mg::cuda
