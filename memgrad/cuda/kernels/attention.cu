// cuda/kernels/attention.cu — the table's fused attention entries (attention_forward,
// attention_backward): the checks on their operands, the empty cases, and the choice of
// our kernels by dtype (float16 / bfloat16: the tensor-core kernels of attention_forward.cu
// and attention_backward.cu; float32: the FP32 FMA kernels of attention_simt_forward.cu
// and attention_simt_backward.cu), which the attention engine setting may replace by
// cuDNN's fused attention (cuda/attention_engine_choice.h); and what those kernels' host
// sides share.
//
// The tensor-core kernels move rows of 8 elements with 16-byte instructions. q, k and v are
// usually views of one packed (B, T, 3, H, D) projection and the output a (B, T, H, D)
// buffer seen as (B, H, T, D): with D a multiple of 8 every row starts 16-byte aligned, and
// they are read and written in place. An operand whose rows are not aligned (a view at an
// odd offset) is copied into a dense WORKSPACE tensor first, and a result is written to one
// and copied back: rare, and correct. (The float32 kernels read any row in place, 16 bytes
// at a time where every row is aligned, else 4.)
//
// Also the 1-D grid the kernels walk (block_tile in attention_tiles.cuh gives its order).
#include <cstdint>
#include <limits>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/cuda/attention_engine_choice.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/runtime.h"
#include "memgrad/cuda/kernels/attention_tiles.cuh"
#include "memgrad/cuda/kernels/cuda_kernels.h"

namespace mg::cuda::attention {

bool rows_aligned_16(const Tensor& tensor) {
  const int64_t elements_per_16_bytes = 16 / static_cast<int64_t>(element_size(tensor.dtype()));
  if (reinterpret_cast<uintptr_t>(tensor.raw_data()) % 16 != 0) return false;
  for (int dim = 0; dim < 3; ++dim) {
    if (tensor.sizes()[dim] > 1 && tensor.strides()[dim] % elements_per_16_bytes != 0) return false;
  }
  return true;
}

namespace {

Tensor dense_workspace_like(const Tensor& tensor) {
  return empty(tensor.sizes(), {.dtype = tensor.dtype(), .device = tensor.device(), .category = MemoryCategory::Workspace});
}

// The user-facing checks shared by forward and backward (dtype, head dim, strides, sizes).
void check_attention_operands(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  MG_CHECK(is_16_bit_float(q.dtype()) || q.dtype() == DType::Float32, op,
           ": the fused CUDA kernels take float16, bfloat16 or float32, got ", dtype_name(q.dtype()),
           ". Hint: use the math backend.");
  MG_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), op, ": q, k and v must share a dtype, got ",
           dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
  MG_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op, ": expected (B, H, T, D) tensors, got q ", q.sizes(),
           ", k ", k.sizes(), ", v ", v.sizes());
  const int64_t head_dim = q.sizes()[3];
  if (is_16_bit_float(q.dtype())) {
    MG_CHECK(head_dim % 8 == 0 && head_dim >= 8 && head_dim <= 128, op, ": the fused CUDA kernels need a head dim "
             "that is a multiple of 8 in [8, 128] for ", dtype_name(q.dtype()), ", got ", head_dim,
             ". Hint: use the math backend.");
  } else {
    MG_CHECK(head_dim >= 1 && head_dim <= 128, op, ": the fused CUDA kernels need a head dim in [1, 128], got ",
             head_dim, ". Hint: use the math backend.");
  }
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

namespace mg::cuda {

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                       const Tensor& output, const Tensor& log_sum_exp) {
  attention::check_attention_operands("scaled_dot_product_attention", q, k, v);
  if (q.sizes()[0] * q.sizes()[1] * q.sizes()[2] == 0) return;
  DeviceGuard guard(q.device());
  if (k.sizes()[2] == 0) {  // no key to attend to: the empty sum
    fill(output, 0.0);
    fill(log_sum_exp, -std::numeric_limits<double>::infinity());
    return;
  }
  const attention::OwnForward own =
      q.dtype() == DType::Float32 ? attention::simt_forward : attention::tensor_core_forward;
  attention::forward_on_chosen_engine(q, k, v, params, output, log_sum_exp, own);
}

void attention_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                        const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  attention::check_attention_operands("scaled_dot_product_attention backward", q, k, v);
  if (q.sizes()[0] * q.sizes()[1] == 0) return;
  DeviceGuard guard(q.device());
  if (q.sizes()[2] == 0 || k.sizes()[2] == 0) {  // nothing attends or nothing is attended to
    if (grad_q.numel() > 0) fill(grad_q, 0.0);
    if (grad_k.numel() > 0) fill(grad_k, 0.0);
    if (grad_v.numel() > 0) fill(grad_v, 0.0);
    return;
  }
  const attention::OwnBackward own =
      q.dtype() == DType::Float32 ? attention::simt_backward : attention::tensor_core_backward;
  attention::backward_on_chosen_engine(grad_output, q, k, v, output, log_sum_exp, params, grad_q, grad_k, grad_v, own);
}

}  // namespace mg::cuda
