// cuda/lt_matmul.cpp — cublasLtMatmul with an epilogue (cuda/lt_matmul.h): lt_matmul, and
// linear_forward through it with CUBLASLT_EPILOGUE_BIAS.
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
// dtype, epilogue, shapes, alignments, TF32) and is then cached: the query costs
// microseconds, more than the rest of the call.
// NOTE: the heuristic assumes 256-byte aligned matrices unless told otherwise, and an
// algorithm chosen under that assumption may fault on a view at a smaller offset; so each
// matrix's true alignment goes into the preference, and it, the bias's and the aux
// matrix's (which the heuristic reads from their pointers) into the cache key.
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
  LtEpilogue epilogue;
  bool transpose_a;
  int64_t m, n, k;
  uint32_t a_alignment, b_alignment, d_alignment, bias_alignment, aux_alignment;
  auto as_tuple() const {
    return std::tuple(device, dtype, compute, epilogue, transpose_a, m, n, k, a_alignment, b_alignment, d_alignment,
                      bias_alignment, aux_alignment);
  }
  bool operator<(const PlanKey& other) const { return as_tuple() < other.as_tuple(); }
};

// The algorithm for `key`, or nothing when cuBLASLt has none (asked once per key).
std::optional<cublasLtMatmulAlgo_t> algorithm_for(const PlanKey& key, cublasLtHandle_t handle,
                                                  cublasLtMatmulDesc_t operation, cublasLtMatrixLayout_t a_layout,
                                                  cublasLtMatrixLayout_t b_layout, cublasLtMatrixLayout_t d_layout,
                                                  size_t workspace_bytes) {
  thread_local std::map<PlanKey, std::optional<cublasLtMatmulAlgo_t>> plans;
  auto found = plans.find(key);
  if (found != plans.end()) return found->second;
  PreferenceDescriptor preference;
  MG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.handle));
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes));
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.a_alignment);
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.b_alignment);
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.d_alignment);
  set_attribute(preference.handle, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.d_alignment);
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, operation, a_layout, b_layout, d_layout, d_layout, preference.handle, 1,
                                     &result, &found_count);
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

cublasLtEpilogue_t lt_epilogue(LtEpilogue epilogue) {
  switch (epilogue) {
    case LtEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::GeluAux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case LtEpilogue::GeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtEpilogue::DGelu: return CUBLASLT_EPILOGUE_DGELU;
    case LtEpilogue::DGeluBiasGrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
  }
  MG_ASSERT(false, "unknown epilogue");
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool uses_bias(LtEpilogue epilogue) {
  return epilogue == LtEpilogue::Bias || epilogue == LtEpilogue::GeluAuxBias || epilogue == LtEpilogue::DGeluBiasGrad;
}

}  // namespace

bool lt_matmul(const LtProduct& product) {
  const auto [m, n, k] = std::tuple(product.m, product.n, product.k);
  const bool gelu = product.epilogue != LtEpilogue::Bias;
  const DType dtype = product.d.dtype();
  // NOTE: products with a size-1 dim (matrix-vector shapes) take the unfused path, as they
  // do in PyTorch's addmm, which saw cuBLASLt's heuristic reject some of them. The GELU
  // epilogues' aux matrix needs a leading dimension (m) that is a multiple of 8, and they
  // are not offered in float64.
  if (m <= 1 || n <= 1 || k <= 1 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return false;
  if (gelu && (m % 8 != 0 || dtype == DType::Float64)) return false;
  MG_ASSERT(uses_bias(product.epilogue) == product.bias.defined() && gelu == product.aux.defined(),
            "lt_matmul: the epilogue's bias and aux operands");
  Device device = product.d.device();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);

  cudaDataType_t type = blas_type(dtype);
  cublasComputeType_t compute = blas_compute_type(dtype);
  MatmulDescriptor operation;
  MG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&operation.handle, compute, blas_scale_type(dtype)));
  set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_TRANSA, product.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(product.epilogue));
  if (product.bias.defined()) set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_BIAS_POINTER, product.bias.raw_data());
  if (gelu) {
    // The aux matrix (the GELU's input) is laid out as D, in D's dtype (cuBLASLt's default).
    set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, product.aux.raw_data());
    set_attribute(operation.handle, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<int64_t>(m));
  }
  // Column-major (rows, cols, leading dimension), each packed.
  LayoutDescriptor a_layout, b_layout, d_layout;
  const auto rows_a = static_cast<uint64_t>(product.transpose_a ? k : m);
  const auto cols_a = static_cast<uint64_t>(product.transpose_a ? m : k);
  MG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_layout.handle, type, rows_a, cols_a, static_cast<int64_t>(rows_a)));
  MG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_layout.handle, type, k, n, k));
  MG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_layout.handle, type, m, n, m));

  auto lt_handle = reinterpret_cast<cublasLtHandle_t>(blas_handle(device, stream));
  void* workspace = blas_workspace(device, stream);
  size_t workspace_bytes = blas_workspace_bytes(device);
  auto alignment_or_zero = [](const Tensor& t) { return t.defined() ? alignment_of(t.raw_data()) : 0u; };
  PlanKey key{device.index,
              dtype,
              compute,
              product.epilogue,
              product.transpose_a,
              m,
              n,
              k,
              alignment_of(product.a.raw_data()),
              alignment_of(product.b.raw_data()),
              alignment_of(product.d.raw_data()),
              alignment_or_zero(product.bias),
              alignment_or_zero(product.aux)};
  std::optional<cublasLtMatmulAlgo_t> algorithm =
      algorithm_for(key, lt_handle, operation.handle, a_layout.handle, b_layout.handle, d_layout.handle, workspace_bytes);
  if (!algorithm) return false;
  // Scalars in the scale type, read from the host; beta 0: D is not read.
  const double alpha_double = 1.0, beta_double = 0.0;
  const float alpha_float = 1.0f, beta_float = 0.0f;
  const void* alpha = dtype == DType::Float64 ? static_cast<const void*>(&alpha_double) : &alpha_float;
  const void* beta = dtype == DType::Float64 ? static_cast<const void*>(&beta_double) : &beta_float;
  MG_CUBLAS_CHECK(cublasLtMatmul(lt_handle, operation.handle, alpha, product.a.raw_data(), a_layout.handle,
                                 product.b.raw_data(), b_layout.handle, beta, product.d.raw_data(), d_layout.handle,
                                 product.d.raw_data(), d_layout.handle, &*algorithm, workspace, workspace_bytes,
                                 stream));
  return true;
}

void linear_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output) {
  // NOTE: an empty tensor may report is_contiguous() false ((8, 0) with strides (1, 1));
  // its layout never matters.
  auto dense = [](const Tensor& t) { return t.numel() == 0 || t.is_contiguous(); };
  MG_ASSERT(dense(input) && dense(weight) && dense(bias) && dense(output), "linear_forward takes contiguous tensors");
  int64_t rows = input.sizes()[0], in_features = input.sizes()[1], out_features = weight.sizes()[0];
  if (rows == 0 || out_features == 0) return;
  DeviceGuard guard(output.device());
  // See the top of the file: D (out, rows) = W^T-read weight times the input, column-major.
  const bool fused = lt_matmul({.a = weight,
                                .transpose_a = true,
                                .b = input,
                                .d = output,
                                .m = out_features,
                                .n = rows,
                                .k = in_features,
                                .epilogue = LtEpilogue::Bias,
                                .bias = bias,
                                .aux = Tensor()});
  // An empty sum (in_features 0) is only the bias.
  if (!fused) unfused_linear(input, weight, bias, output);
}

}  // namespace mg::cuda
