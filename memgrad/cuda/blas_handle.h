// cuda/blas_handle.h — the cuBLAS handle a thread uses on a device, and the workspace cuBLAS
// (and the cuBLASLt kernels it runs, or that cuda/lt_matmul.cpp calls) computes in.
//
// Handles are created lazily, one per (thread, device) — cuBLAS handles must not be used by
// two threads at once — and go back to a pool when their thread ends. Each call binds the
// handle to the stream the work goes to and to that stream's workspace: a block from the
// caching allocator tagged WORKSPACE (so memory reports show it), allocated at the first
// matmul on the stream and kept for the life of the process, as PyTorch keeps its own.
// Without it cuBLAS would cudaMalloc a workspace of its own, invisible to the reports.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "memgrad/core/device.h"

namespace mg::cuda {

// The calling thread's cuBLAS handle for `device`, bound to `stream` and its workspace.
// The current CUDA device must be `device` (see DeviceGuard).
cublasHandle_t blas_handle(Device device, cudaStream_t stream);

// The workspace of `stream` on `device` (blas_workspace_bytes long), for cuBLASLt calls.
// NOTE: cuBLAS and cuBLASLt share it: work on one stream runs in order, so two GEMMs on the
// stream never use it at once.
void* blas_workspace(Device device, cudaStream_t stream);

// Bytes of one stream's cuBLAS workspace on `device`, by its compute capability
// (cuda/plan/blas_workspace.h: 32 MiB on Hopper and newer, 8 MiB before).
size_t blas_workspace_bytes(Device device);

}  // namespace mg::cuda
