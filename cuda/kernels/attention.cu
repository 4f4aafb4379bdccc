// cuda/kernels/attention.cu — the host side the fused attention kernels share: the checks
// on their operands and the 16-byte alignment their tile copies need.
//
// The kernels (attention_forward.cu, attention_backward.cu) move rows of 8 elements with
// 16-byte instructions. q, k and v are usually views of one packed (B, T, 3, H, D)
// projection and the output a (B, T, H, D) buffer seen as (B, H, T, D): with D a multiple
// of 8 every row starts 16-byte aligned, and they are read and written in place. An operand
// whose rows are not aligned (a view at an odd offset) is copied into a dense WORKSPACE
// tensor first, and a result is written to one and copied back: rare, and correct.
//
// Also the 1-D grid both kernels walk (block_tile in attention_tiles.cuh gives its order).
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/factory.h"
#include "cuda/check.h"
#include "cuda/kernels/attention_tiles.cuh"
#include "cuda/kernels/cuda_kernels.h"

namespace mg::cuda::attention {

bool rows_aligned_16(const Tensor& tensor) {
  constexpr int64_t kElementsPer16Bytes = 8;  // float16 / bfloat16
  if (reinterpret_cast<uintptr_t>(tensor.raw_data()) % 16 != 0) return false;
  for (int dim = 0; dim < 3; ++dim) {
    if (tensor.sizes()[dim] > 1 && tensor.strides()[dim] % kElementsPer16Bytes != 0) return false;
  }
  return true;
}

namespace {

Tensor dense_workspace_like(const Tensor& tensor) {
  return empty(tensor.sizes(), {.dtype = tensor.dtype(), .device = tensor.device(), .category = MemoryCategory::Workspace});
}

}  // namespace

Tensor aligned_operand(const Tensor& tensor) {
  if (rows_aligned_16(tensor)) return tensor;
  Tensor dense = dense_workspace_like(tensor);
  copy(tensor, dense);
  return dense;
}

Tensor aligned_result(const Tensor& destination) {
  return rows_aligned_16(destination) ? destination : dense_workspace_like(destination);
}

void finish_aligned_result(const Tensor& written, const Tensor& destination) {
  if (written.raw_data() != destination.raw_data()) copy(written, destination);
}

HeadStrides head_strides(const Tensor& tensor) {
  return {tensor.strides()[0], tensor.strides()[1], tensor.strides()[2]};
}

void check_attention_operands(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  MG_CHECK(q.dtype() == DType::Float16 || q.dtype() == DType::BFloat16, op,
           ": the fused CUDA kernels take float16 or bfloat16, got ", dtype_name(q.dtype()),
           ". Hint: use the math backend, or autocast to a 16-bit type.");
  MG_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), op, ": q, k and v must share a dtype, got ",
           dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
  MG_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op, ": expected (B, H, T, D) tensors, got q ", q.sizes(),
           ", k ", k.sizes(), ", v ", v.sizes());
  const int64_t head_dim = q.sizes()[3];
  MG_CHECK(head_dim % 8 == 0 && head_dim >= 8 && head_dim <= 128, op,
           ": the fused CUDA kernels need a head dim that is a multiple of 8 in [8, 128], got ", head_dim,
           ". Hint: use the math backend.");
  MG_CHECK(k.sizes()[3] == head_dim && v.sizes()[3] == head_dim, op,
           ": q, k and v must share the head dim, got q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  for (const Tensor* tensor : {&q, &k, &v}) {
    MG_CHECK(tensor->strides()[3] == 1, op, ": the head dim must have unit stride, got strides ", tensor->strides(),
             " for sizes ", tensor->sizes(), ". Hint: make the tensor contiguous.");
  }
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  MG_CHECK(q.sizes()[2] <= kIntMax && k.sizes()[2] <= kIntMax && q.sizes()[0] * q.sizes()[1] <= kIntMax, op,
           ": sequences and batch x heads must each be below 2^31, got q ", q.sizes(), ", k ", k.sizes());
}

dim3 attention_grid(int64_t tiles, int64_t batch_heads) {
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  MG_CHECK(tiles * batch_heads <= kIntMax, "scaled_dot_product_attention: the fused CUDA kernels run at most ",
           kIntMax, " blocks, got ", tiles, " tiles x ", batch_heads, " batches x heads. Hint: use the math backend.");
  return dim3(static_cast<unsigned>(tiles * batch_heads));
}

void allow_shared_memory(const void* kernel, int bytes) {
  constexpr int kDefaultLimit = 48 * 1024;
  if (bytes <= kDefaultLimit) return;
  MG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

}  // namespace mg::cuda::attention
