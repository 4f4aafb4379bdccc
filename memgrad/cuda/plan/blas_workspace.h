// cuda/plan/blas_workspace.h — how large the workspace is that cuBLAS and cuBLASLt compute
// in: one block per stream, allocated at the first matmul on the stream and kept for the
// life of the process (cuda/blas_handle.h).
//
// Host arithmetic only, built in every build: cuda/blas_handle.cpp sizes the real
// workspace with it and the memory predictor (memory/cuda_scratch_model.cpp) the modelled one.
#pragma once

#include <cstddef>

namespace mg::cuda {

// Bytes of one stream's workspace on a GPU of compute capability `compute_capability_major`.x:
// 32 MiB on Hopper (9.x) and newer, 8 MiB before (PyTorch's defaults).
size_t blas_workspace_bytes_for_capability(int compute_capability_major);

// The compute capability a prediction assumes (the GPU is not asked): Hopper, as the H200
// the predictions are checked against.
inline constexpr int kPredictedComputeCapabilityMajor = 9;

}  // namespace mg::cuda
