// cuda/cudnn/attention_graph.h — scaled dot-product attention (no dropout, no mask but
// the causal one) as a cuDNN backend operation graph that cuDNN's runtime fusion engines
// recognise as flash attention, forward and backward, and the variant pack binding one
// call's pointers to it.
//
// The op sequence is the one NVIDIA's cudnn-frontend composes for its SDPA nodes
// (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h, softmax.h,
// diagonal_band_mask.h at commit 3929da2, read 2026-12-07), written here against the
// backend API as cuda/cudnn/conv_graph.cpp writes the convolution's:
//   forward   S = (Q K^T) * scale, causal: S = select(S, -inf, row >= col);
//             M = rowmax S, E = exp(S - M), L = rowsum E; Stats = M + log L;
//             O = (E / L, rounded to the dtype) V
//   backward  D = rowsum(dO o O) (float32, real: a WORKSPACE slice); P = exp(S - Stats);
//             dV = P^T dO; dS = (dO V^T - D) o P * scale; dK = dS^T Q;
//             dQ = dS K, through a float32 accumulator (a WORKSPACE slice) unless
//             deterministic (the frontend's is_deterministic_algorithm graph on Hopper).
// What is known without a GPU (2026-12-07, cuDNN 9.19): every tensor, pointwise, matmul,
// reduction and reshape descriptor of both graphs (causal or not, deterministic or not,
// Tq != Tk) finalizes, including cuDNN's shape checks of each matmul, in a scratch program
// that stopped only at the graph's handle (there is no handle without a GPU). Whether
// cuDNN's fusion engines accept the whole graph, and the results, are for the GPU tests
// (tests/cuda/test_cuda_attention_cudnn.cpp).
// NOTE: Stats is exactly memgrad's log_sum_exp (core/kernel_list.h): the natural log
// (POINTWISE_LOG) of the sum over the attended keys of exp of the SCALED scores (the scale
// multiplies before the max is taken; masked keys are -inf and add 0), float32, (B, H, Tq)
// contiguous = cuDNN's (B, H, Tq, 1) with strides (H Tq, Tq, 1, 1). So either engine's
// forward feeds either engine's backward (tests/cuda/test_cuda_attention_cudnn.cpp).
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "memgrad/cuda/cudnn/backend_descriptor.h"
#include "memgrad/cuda/plan/attention_engine.h"

namespace mg::cuda::cudnn {

// The graph's descriptors; the graph itself is the last. The others are its parts, kept
// alive with it (as ConvPlan keeps a convolution's).
struct AttentionGraph {
  std::vector<BackendDescriptor> parts;
  const BackendDescriptor& graph() const { return parts.back(); }
};

// The graph of `problem`, or null when cuDNN refuses to finalize it (an answer: the
// caller runs our kernels, or throws for a forced cuDNN engine).
std::unique_ptr<AttentionGraph> attention_graph(cudnnHandle_t handle, const AttentionProblem& problem);

// Bytes the graph's own float32 scratch tensors take, placed after the execution plan's
// workspace in one WORKSPACE buffer: backward's D (B H Tq) and, unless deterministic, the
// dQ accumulator (B H Tq D); forward none. Each slice 256-byte aligned.
size_t attention_graph_scratch_bytes(const AttentionProblem& problem);
// Where the scratch starts in that buffer: the plan's workspace rounded up to 256 bytes.
size_t attention_graph_scratch_offset(size_t plan_workspace_bytes);

// One call's device pointers: forward reads q, k, v and writes output and log_sum_exp;
// backward reads q, k, v, output, log_sum_exp, grad_output and writes grad_q/k/v.
struct AttentionOperands {
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* output = nullptr;
  void* log_sum_exp = nullptr;
  void* grad_output = nullptr;
  void* grad_q = nullptr;
  void* grad_k = nullptr;
  void* grad_v = nullptr;
};

// The variant pack of one run: `data` bound to the graph's tensors, the scale by value
// (a host float cuDNN reads while enqueuing, so the pack may die after the call),
// `workspace` of attention_graph_scratch_offset(plan_workspace_bytes) +
// attention_graph_scratch_bytes bytes (or nullptr when that is 0).
BackendDescriptor attention_variant_pack(const AttentionProblem& problem, const AttentionOperands& data,
                                         const float& scale, void* workspace, size_t plan_workspace_bytes);

}  // namespace mg::cuda::cudnn
