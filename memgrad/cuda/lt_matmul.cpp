// cuda/lt_matmul.cpp — linear_forward through cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS.
//
// Layout, as in cuda/matmul.cpp (row-major bytes read as column-major matrices): the
// row-major output (rows, out) is the column-major (out, rows) matrix D = W X^T, where the
// row-major weight (out, in) is the column-major (in, out) matrix read transposed
// (TRANSA = T) and the row-major input (rows, in) is the column-major (in, rows) matrix read
// as is. The bias epilogue adds a vector as long as D's column (out) to every column of D:
// bias[j] to output[:, j]. cuBLASLt runs on the thread's cuBLAS handle (a cublasHandle_t is
// a valid cublasLtHandle_t, as cuBLAS documents) in the stream's cuBLAS workspace.
//
// The algorithm comes from cublasLtMatmulAlgoGetHeuristic once per thread and (device,
// dtype, shapes, alignments, TF32) and is then cached: the query costs microseconds, more
// than the rest of the call.
// NOTE: the heuristic assumes 256-byte aligned matrices unless told otherwise, and an
// algorithm chosen under that assumption may fault on a view at a smaller offset; so each
// matrix's true alignment goes into the preference, and it and the bias's (which the
// heuristic reads from the bias pointer) into the cache key.
#include "memgrad/cuda/lt_matmul.h"

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>

#include "memgrad/core/factory.h"
#include "memgrad/cuda/blas_handle.h"
#include "memgrad/cuda/blas_types.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

// A cuBLASLt descriptor, destroyed at the end of the call that created it.
template <class Handle, cublasStatus_t (*Destroy)(Handle)>
struct LtDescriptor {
  Handle handle = nullptr;
  LtDescriptor() = default;
  LtDescriptor(const LtDescriptor&) = delete;
  LtDescriptor& operator=(const LtDescriptor&) = delete;
  ~LtDescriptor() {
    if (handle != nullptr) (void)Destroy(handle);
  }
};
using MatmulDescriptor = LtDescriptor<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LayoutDescriptor = LtDescriptor<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using PreferenceDescriptor = LtDescriptor<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

template <class Value>
void set_attribute(cublasLtMatmulDesc_t descriptor, cublasLtMatmulDescAttributes_t attribute, const Value& value) {
  MG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(descriptor, attribute, &value, sizeof value));
}
template <class Value>
void set_attribute(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                   const Value& value) {
  MG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof value));
}

// The largest power of two up to 256 that divides the address.
uint32_t alignment_of(const void* pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 1;
  while (alignment < 256 && address % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

// What the heuristic's answer depends on.
struct PlanKey {
  int device;
  DType dtype;
  cublasComputeType_t compute;
  int64_t rows, in_features, out_features;
  uint32_t input_alignment, weight_alignment, output_alignment, bias_alignment;
  auto as_tuple() const {
    return std::tuple(device, dtype, compute, rows, in_features, out_features, input_alignment, weight_alignment,
                      output_alignment, bias_alignment);
  }
  bool operator<(const PlanKey& other) const { return as_tuple() < other.as_tuple(); }
};

// The algorithm for `key`, or nothing when cuBLASLt has none (asked once per key).
std::optional<cublasLtMatmulAlgo_t> algorithm_for(const PlanKey& key, cublasLtHandle_t handle,
                                                  cublasLtMatmulDesc_t operation, cublasLtMatrixLayout_t weight_layout,
                                                  cublasLtMatrixLayout_t input_layout,
                                                  cublasLtMatrixLayout_t output_layout, size_t workspace_bytes) {
  thread_local std::map<PlanKey, std::optional<cublasLtMatmulAlgo_t>> plans;
  auto found = plans.find(key);
  if (found != plans.end()) return found->second;
  PreferenceDescriptor preference;
  MG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.handle));
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes));
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.weight_alignment);
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.input_alignment);
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.output_alignment);
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.output_alignment);
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, operation, weight_layout, input_layout, output_layout, output_layout,
                                     preference.handle, 1, &result, &found_count);
  // NOT_SUPPORTED is the heuristic's "no algorithm for this problem": an answer, not an error.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) MG_CUBLAS_CHECK(status);
  std::optional<cublasLtMatmulAlgo_t> algorithm;
  if (status == CUBLAS_STATUS_SUCCESS && found_count > 0) algorithm = result.algo;
  plans.emplace(key, algorithm);
  return algorithm;
}

// The same result in two kernels: cuBLAS's GEMM, then the bias added in place.
void unfused_linear(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output) {
  int64_t rows = input.sizes()[0], in_features = input.sizes()[1], out_features = weight.sizes()[0];
  matmul(make_view(input, {1, rows, in_features}, {0, in_features, 1}, input.storage_offset()),
         make_view(weight, {1, in_features, out_features}, {0, 1, in_features}, weight.storage_offset()),
         make_view(output, {1, rows, out_features}, {0, out_features, 1}, output.storage_offset()));
  binary(BinaryOp::Add, output, make_view(bias, {rows, out_features}, {0, 1}, bias.storage_offset()), output);
}

}  // namespace

void linear_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output) {
  // NOTE: an empty tensor may report is_contiguous() false ((8, 0) with strides (1, 1));
  // its layout never matters.
  auto dense = [](const Tensor& t) { return t.numel() == 0 || t.is_contiguous(); };
  MG_ASSERT(dense(input) && dense(weight) && dense(bias) && dense(output), "linear_forward takes contiguous tensors");
  int64_t rows = input.sizes()[0], in_features = input.sizes()[1], out_features = weight.sizes()[0];
  if (rows == 0 || out_features == 0) return;
  Device device = output.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  // NOTE: products with a size-1 dim (matrix-vector shapes) take the unfused path, as they
  // do in PyTorch's addmm, which saw cuBLASLt's heuristic reject some of them; an empty sum
  // (in_features 0) is only the bias.
  if (rows == 1 || in_features <= 1 || out_features == 1 || rows > INT32_MAX || in_features > INT32_MAX ||
      out_features > INT32_MAX) {
    unfused_linear(input, weight, bias, output);
    return;
  }

  DType dtype = output.dtype();
  cudaDataType_t type = blas_type(dtype);
  cublasComputeType_t compute = blas_compute_type(dtype);
  MatmulDescriptor operation;
  MG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&operation.handle, compute, blas_scale_type(dtype)));
  set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.raw_data());
  // Column-major (rows, cols, leading dimension); see the top for why these shapes.
  LayoutDescriptor weight_layout, input_layout, output_layout;
  auto in = static_cast<uint64_t>(in_features), out = static_cast<uint64_t>(out_features);
  auto batch = static_cast<uint64_t>(rows);
  MG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&weight_layout.handle, type, in, out, static_cast<int64_t>(in)));
  MG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&input_layout.handle, type, in, batch, static_cast<int64_t>(in)));
  MG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&output_layout.handle, type, out, batch, static_cast<int64_t>(out)));

  auto lt_handle = reinterpret_cast<cublasLtHandle_t>(blas_handle(device, stream));
  void* workspace = blas_workspace(device, stream);
  size_t workspace_bytes = blas_workspace_bytes(device);
  PlanKey key{device.index,
              dtype,
              compute,
              rows,
              in_features,
              out_features,
              alignment_of(input.raw_data()),
              alignment_of(weight.raw_data()),
              alignment_of(output.raw_data()),
              alignment_of(bias.raw_data())};
  std::optional<cublasLtMatmulAlgo_t> algorithm = algorithm_for(
      key, lt_handle, operation.handle, weight_layout.handle, input_layout.handle, output_layout.handle,
      workspace_bytes);
  if (!algorithm) {
    unfused_linear(input, weight, bias, output);
    return;
  }
  // Scalars in the scale type, read from the host; beta 0: D is not read.
  const double alpha_double = 1.0, beta_double = 0.0;
  const float alpha_float = 1.0f, beta_float = 0.0f;
  const void* alpha = dtype == DType::Float64 ? static_cast<const void*>(&alpha_double) : &alpha_float;
  const void* beta = dtype == DType::Float64 ? static_cast<const void*>(&beta_double) : &beta_float;
  MG_CUBLAS_CHECK(cublasLtMatmul(lt_handle, operation.handle, alpha, weight.raw_data(), weight_layout.handle,
                                 input.raw_data(), input_layout.handle, beta, output.raw_data(), output_layout.handle,
                                 output.raw_data(), output_layout.handle, &*algorithm, workspace, workspace_bytes,
                                 stream));
}

}  // namespace mg::cuda
