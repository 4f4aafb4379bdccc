// cuda/blas_types.h — how memgrad's dtypes are named to cuBLAS and cuBLASLt, and the
// precision a product of each dtype computes in: one rule for cuda/matmul.cpp and
// cuda/lt_matmul.cpp, so a linear layer and a matmul of the same operands round alike.
//
// float32 computes in float32 (CUBLAS_COMPUTE_32F), or in TF32 on tensor cores when
// mg::cuda::allow_tf32() (off by default, as in PyTorch); float16 and bfloat16 multiply on
// tensor cores and accumulate in float32; float64 computes in float64.
#pragma once

#include <cublas_v2.h>

#include "memgrad/core/dtype.h"
#include "memgrad/core/error.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

inline cudaDataType_t blas_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float64: return CUDA_R_64F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default: break;
  }
  MG_CHECK(false, "cuBLAS: expected a floating dtype (float32, float64, float16, bfloat16), got ", dtype);
}

inline cublasComputeType_t blas_compute_type(DType dtype) {
  if (dtype == DType::Float64) return CUBLAS_COMPUTE_64F;
  return dtype == DType::Float32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// The type alpha and beta are given in: the accumulator's.
inline cudaDataType_t blas_scale_type(DType dtype) { return dtype == DType::Float64 ? CUDA_R_64F : CUDA_R_32F; }

}  // namespace mg::cuda
