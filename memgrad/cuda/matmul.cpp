// cuda/matmul.cpp — CUDA batched matrix product through cuBLAS.
//
// memgrad's matrices are row-major; cuBLAS's are column-major. A row-major (M, N) output
// is, byte for byte, the column-major (N, M) matrix C^T, and C^T = B^T A^T: so cuBLAS is
// asked for an (N, M) product of b's and a's transposes, and never sees a copy. Each
// operand may be a row-major view (unit column stride) or a column-major one (unit row
// stride, e.g. a transposed weight); which one picks CUBLAS_OP_N or CUBLAS_OP_T and the
// leading dimension. Only an operand with neither unit stride is copied to contiguous.
// Batches go to cublasGemmStridedBatchedEx, whose batch strides may be 0 (a weight
// broadcast over the batch is read in place, never repeated); one product to cublasGemmEx.
//
// Precision: cuda/blas_types.h's rule (TF32 for float32 only when mg::cuda::allow_tf32()).
#include <algorithm>
#include <climits>
#include <optional>

#include "memgrad/core/factory.h"
#include "memgrad/cuda/blas_handle.h"
#include "memgrad/cuda/blas_types.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

// How cuBLAS reads one logical (rows, cols) matrix with element strides (row_stride,
// col_stride) as the transpose it needs (see the top): op and leading dimension.
struct BlasOperand {
  cublasOperation_t op;
  int64_t leading_dimension;
};

// NOTE: a size-1 dim's stride is meaningless (views give it anything), so it never
// decides a layout; cuBLAS still wants a leading dimension >= the stored rows.
std::optional<BlasOperand> blas_operand(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  // Row-major: the bytes are the column-major (cols, rows) transpose, read as is.
  if ((col_stride == 1 || cols == 1) && (rows == 1 || row_stride >= std::max<int64_t>(cols, 1))) {
    return BlasOperand{CUBLAS_OP_N, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  }
  // Column-major: the bytes are the matrix itself, column-major, transposed by cuBLAS.
  if ((row_stride == 1 || rows == 1) && (cols == 1 || col_stride >= std::max<int64_t>(rows, 1))) {
    return BlasOperand{CUBLAS_OP_T, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  }
  return std::nullopt;
}

// A (B, R, C) operand cuBLAS can read: itself, or a contiguous copy. A broadcast operand
// (batch stride 0) is copied once, not once per batch.
Tensor readable(const Tensor& operand) {
  const Shape& sizes = operand.sizes();
  if (blas_operand(sizes[1], sizes[2], operand.strides()[1], operand.strides()[2])) return operand;
  if (operand.strides()[0] == 0 && sizes[0] > 1) {
    Tensor one = contiguous_copy(make_view(operand, {1, sizes[1], sizes[2]},
                                           {0, operand.strides()[1], operand.strides()[2]}, operand.storage_offset()));
    return make_view(one, sizes, {0, sizes[2], 1}, one.storage_offset());
  }
  return contiguous_copy(operand);
}

int as_blas_int(int64_t value, const char* what) {
  MG_CHECK(value <= INT_MAX, "matmul on CUDA: ", what, " (", value, ") exceeds cuBLAS's 32-bit limit");
  return static_cast<int>(value);
}

}  // namespace

namespace {

// output = a @ b + beta * output, the product in a's dtype's compute type (blas_types.h),
// output in a's dtype or, for 16-bit operands, float32.
void gemm(const Tensor& a, const Tensor& b, const Tensor& output, float beta) {
  MG_ASSERT(output.is_contiguous(), "matmul output must be contiguous");
  int64_t batches = output.sizes()[0], m = output.sizes()[1], n = output.sizes()[2], k = a.sizes()[2];
  if (batches == 0 || m == 0 || n == 0) return;
  Device device = output.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  if (k == 0) {
    // An empty sum: zeros (all-zero bits are 0.0 in every floating type), or output as is.
    if (beta == 0.0f) MG_CUDA_CHECK(cudaMemsetAsync(output.raw_data(), 0, output.nbytes(), stream));
    return;
  }
  Tensor lhs = readable(a), rhs = readable(b);
  // C^T (n, m) = op(rhs) (n, k) @ op(lhs) (k, m), column-major.
  BlasOperand first = *blas_operand(k, n, rhs.strides()[1], rhs.strides()[2]);
  BlasOperand second = *blas_operand(m, k, lhs.strides()[1], lhs.strides()[2]);

  DType dtype = a.dtype();
  cudaDataType_t type = blas_type(dtype), output_type = blas_type(output.dtype());
  cublasComputeType_t compute = blas_compute_type(dtype);
  // Scalars in the compute precision, read from the host.
  const double alpha_double = 1.0, beta_double = beta;
  const float alpha_float = 1.0f, beta_float = beta;
  const void* alpha = dtype == DType::Float64 ? static_cast<const void*>(&alpha_double) : &alpha_float;
  const void* beta_scalar = dtype == DType::Float64 ? static_cast<const void*>(&beta_double) : &beta_float;

  int blas_m = as_blas_int(n, "N"), blas_n = as_blas_int(m, "M"), blas_k = as_blas_int(k, "K");
  int lda = as_blas_int(first.leading_dimension, "a leading dimension");
  int ldb = as_blas_int(second.leading_dimension, "a leading dimension");
  int ldc = blas_m;
  cublasHandle_t handle = blas_handle(device, stream);
  if (batches == 1) {
    MG_CUBLAS_CHECK(cublasGemmEx(handle, first.op, second.op, blas_m, blas_n, blas_k, alpha, rhs.raw_data(), type, lda,
                                 lhs.raw_data(), type, ldb, beta_scalar, output.raw_data(), output_type, ldc, compute,
                                 CUBLAS_GEMM_DEFAULT));
  } else {
    MG_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, first.op, second.op, blas_m, blas_n, blas_k, alpha, rhs.raw_data(), type, lda,
        static_cast<long long>(rhs.strides()[0]), lhs.raw_data(), type, ldb, static_cast<long long>(lhs.strides()[0]),
        beta_scalar, output.raw_data(), output_type, ldc, static_cast<long long>(m * n),
        as_blas_int(batches, "the batch count"), compute, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, const Tensor& output) { gemm(a, b, output, 0.0f); }

void matmul_into(const Tensor& a, const Tensor& b, const Tensor& output, bool accumulate) {
  gemm(a, b, output, accumulate ? 1.0f : 0.0f);
}

}  // namespace mg::cuda
