// cuda/check.cpp — turning CUDA and cuBLAS status codes into mg::Error.
#include "memgrad/cuda/check.h"

namespace mg::cuda::detail {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  // Clear a sticky launch error so the next check reports its own problem.
  cudaGetLastError();
  mg::detail::throw_error(mg::detail::str_cat("CUDA error ", cudaGetErrorName(status), " (",
                                              cudaGetErrorString(status), ") in ", call, " at ",
                                              file, ":", line));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  mg::detail::throw_error(mg::detail::str_cat("cuBLAS error ", cublasGetStatusName(status), " (",
                                              cublasGetStatusString(status), ") in ", call, " at ",
                                              file, ":", line));
}

}  // namespace mg::cuda::detail
