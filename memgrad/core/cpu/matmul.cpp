// core/cpu/matmul.cpp — CPU batched matrix product through Eigen's GEMM.
//
// Each (M, K) @ (K, N) slice is handed to Eigen as a Map over the tensor's own memory:
// row-major when its columns are contiguous, column-major when its rows are (a transposed
// view), so transposes cost no copy. Eigen parallelises one large product with OpenMP;
// many small ones are spread over threads by batch instead. linear_forward is one GEMM
// whose result gets the bias added while Eigen still holds it.
#include <Eigen/Core>
#include <omp.h>

#include <initializer_list>
#include <span>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/factory.h"

namespace mg::cpu {

namespace {

template <class T>
using RowMajorMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>,
                               Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using ColMajorMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>,
                               Eigen::Unaligned, Eigen::OuterStride<>>;

// Calls fn(map) with a map of the (rows, cols) matrix at `data` with the given strides.
template <class T, class Fn>
void with_matrix(const T* data, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, Fn&& fn) {
  if (col_stride == 1 || cols == 1) {
    fn(RowMajorMap<T>(data, rows, cols, Eigen::OuterStride<>(rows == 1 ? cols : row_stride)));
  } else {
    MG_ASSERT(row_stride == 1 || rows == 1, "matmul operand needs one unit stride");
    fn(ColMajorMap<T>(data, rows, cols, Eigen::OuterStride<>(cols == 1 ? rows : col_stride)));
  }
}

bool has_unit_stride(const Tensor& matrix_batch) {
  int64_t rows = matrix_batch.sizes()[1], cols = matrix_batch.sizes()[2];
  return matrix_batch.strides()[2] == 1 || matrix_batch.strides()[1] == 1 || rows == 1 || cols == 1;
}

template <class T>
void matmul_typed(const Tensor& a, const Tensor& b, const Tensor& output) {
  int64_t batches = output.sizes()[0], m = output.sizes()[1], n = output.sizes()[2], k = a.sizes()[2];
  const T* a_data = a.data_ptr<T>();
  const T* b_data = b.data_ptr<T>();
  T* out_data = output.data_ptr<T>();
  auto multiply = [&](int64_t batch) {
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> out(out_data + batch * m * n, m, n);
    with_matrix(a_data + batch * a.strides()[0], m, k, a.strides()[1], a.strides()[2], [&](const auto& lhs) {
      with_matrix(b_data + batch * b.strides()[0], k, n, b.strides()[1], b.strides()[2],
                  [&](const auto& rhs) { out.noalias() = lhs * rhs; });
    });
  };
  // Threads pay off only when each has real work; tiny products stay on one thread.
  constexpr int64_t kMinParallelMultiplyAdds = int64_t{1} << 20;
  if (batches >= omp_get_max_threads() && batches > 1 && batches * m * n * k >= kMinParallelMultiplyAdds) {
#pragma omp parallel for schedule(static)
    for (int64_t batch = 0; batch < batches; ++batch) multiply(batch);
  } else {
    for (int64_t batch = 0; batch < batches; ++batch) multiply(batch);
  }
}

template <class T>
void linear_typed(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  int64_t rows = input.sizes()[0], in_features = input.sizes()[1], out_features = weight.sizes()[0];
  Eigen::Map<const Matrix> x(input.data_ptr<T>(), rows, in_features);           // (N, in)
  Eigen::Map<const Matrix> w(weight.data_ptr<T>(), out_features, in_features);  // (out, in)
  Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>> b(bias.data_ptr<T>(), out_features);
  Eigen::Map<Matrix> y(output.data_ptr<T>(), rows, out_features);  // (N, out)
  y.noalias() = x * w.transpose();
  y.rowwise() += b;
}

// Calls compute<T>(operands, result): for 16-bit floats with T = float on float32 copies,
// rounding the result into output once at the end; else on the operands and output.
template <class Compute>
void in_compute_precision(const Tensor& output, std::initializer_list<Tensor> operands, Compute&& compute) {
  switch (output.dtype()) {
    case DType::Float32: compute.template operator()<float>(std::span(operands.begin(), operands.size()), output); return;
    case DType::Float64: compute.template operator()<double>(std::span(operands.begin(), operands.size()), output); return;
    case DType::Float16:
    case DType::BFloat16: {
      std::vector<Tensor> converted;
      for (const Tensor& operand : operands) converted.push_back(converted_copy(operand, DType::Float32, operand.device()));
      Tensor result = empty(output.sizes());
      compute.template operator()<float>(converted, result);
      copy(result, output);
      return;
    }
    default: MG_ASSERT(false, "a product on ", output.dtype());
  }
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, const Tensor& output) {
  MG_ASSERT(output.is_contiguous(), "matmul output must be contiguous");
  Tensor lhs = has_unit_stride(a) ? a : contiguous_copy(a);
  Tensor rhs = has_unit_stride(b) ? b : contiguous_copy(b);
  in_compute_precision(output, {lhs, rhs}, [&]<class T>(std::span<const Tensor> operands, const Tensor& result) {
    matmul_typed<T>(operands[0], operands[1], result);
  });
}

void matmul_into(const Tensor& a, const Tensor& b, const Tensor& output, bool accumulate) {
  // The reference, plainly: the product in output's dtype (operands converted to it, exactly),
  // then added. Only linear_cross_entropy's chunked weight gradient comes here.
  auto as_output_dtype = [&](const Tensor& t) {
    return t.dtype() == output.dtype() ? t : converted_copy(t, output.dtype(), t.device());
  };
  if (!accumulate) {
    matmul(as_output_dtype(a), as_output_dtype(b), output);
    return;
  }
  Tensor product = empty(output.sizes(), {.dtype = output.dtype()});
  matmul(as_output_dtype(a), as_output_dtype(b), product);
  binary(BinaryOp::Add, output, product, output);
}

void linear_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output) {
  // NOTE: an empty tensor may report is_contiguous() false ((8, 0) with strides (1, 1));
  // its layout never matters.
  auto dense = [](const Tensor& t) { return t.numel() == 0 || t.is_contiguous(); };
  MG_ASSERT(dense(input) && dense(weight) && dense(bias) && dense(output), "linear_forward takes contiguous tensors");
  in_compute_precision(output, {input, weight, bias}, [&]<class T>(std::span<const Tensor> operands,
                                                                   const Tensor& result) {
    linear_typed<T>(operands[0], operands[1], operands[2], result);
  });
}

}  // namespace mg::cpu
