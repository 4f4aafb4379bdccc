// cuda/check.h — every CUDA runtime and cuBLAS call is checked; a failure becomes an
// mg::Error naming the call, the file and the line, and the library's own message.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "memgrad/core/error.h"

namespace mg::cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace mg::cuda::detail

#define MG_CUDA_CHECK(call)                                                              \
  do {                                                                                   \
    cudaError_t mg_cuda_status = (call);                                                 \
    if (mg_cuda_status != cudaSuccess) [[unlikely]]                                      \
      ::mg::cuda::detail::throw_cuda_error(mg_cuda_status, #call, __FILE__, __LINE__);   \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define MG_CUDA_CHECK_LAUNCH() MG_CUDA_CHECK(cudaGetLastError())

#define MG_CUBLAS_CHECK(call)                                                            \
  do {                                                                                   \
    cublasStatus_t mg_cublas_status = (call);                                            \
    if (mg_cublas_status != CUBLAS_STATUS_SUCCESS) [[unlikely]]                          \
      ::mg::cuda::detail::throw_cublas_error(mg_cublas_status, #call, __FILE__, __LINE__); \
  } while (0)
