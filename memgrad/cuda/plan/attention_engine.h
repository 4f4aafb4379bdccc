// cuda/plan/attention_engine.h — which implementation runs fused attention on CUDA
// (the kernel table's attention_forward / attention_backward): memgrad's own
// FlashAttention-2 kernels (cuda/kernels/attention_*.cu) or cuDNN's fused flash attention
// (cuda/cudnn/attention_graph.h), and the host facts that choice rests on.
//
// - Own: always our kernels, the portable path and the reference.
// - Cudnn: cuDNN's SDPA where it applies (cudnn_attention_unsupported_reason); a call it
//   does not apply to throws mg::Error naming why. Hint in the error: use Auto.
// - Auto: where cuDNN applies, the first call of each problem times both engines
//   (forward and backward separately) and every later call of that problem runs the
//   faster; elsewhere our kernels, silently. See cuda/attention_engine_choice.cpp.
// NOTE: the default is Auto since the cuDNN engine's GPU tests passed on an H100
// (2026-12-07, commit 35f1c04); there cuDNN's engine took GPT-2's attention (forward +
// backward, B=8, H=12, T=1024, D=64, bf16, causal) from 0.287 ms to 0.215 ms.
//
// Host arithmetic only, built in every build (a CPU build parses the examples' flag and
// its tests check the rules without a GPU).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "memgrad/core/device.h"
#include "memgrad/core/dtype.h"

namespace mg::cuda {

enum class AttentionEngine : uint8_t { Own, Cudnn, Auto };

// Process-wide; any thread may switch it. Auto's kept choices (per problem) stay valid
// across switches: they are only read under Auto.
void set_attention_engine(AttentionEngine engine);
AttentionEngine attention_engine();

const char* attention_engine_name(AttentionEngine engine);  // "own", "cudnn", "auto"
// "own", "cudnn" or "auto" (what attention_engine_name gives); anything else throws
// mg::Error naming the three.
AttentionEngine parse_attention_engine(std::string_view text);

enum class AttentionDirection : uint8_t { Forward, Backward };

// One fused attention call as cuDNN's graph sees it. Strides are (batch, head, row) in
// elements; the head dim's stride is 1 (the kernel table's contract).
// Forward's tensors: q, k, v, output. Backward adds grad_output, grad_q, grad_k, grad_v.
struct AttentionProblem {
  AttentionDirection direction = AttentionDirection::Forward;
  DType dtype = DType::BFloat16;
  int64_t batch = 0, heads = 0, query_len = 0, key_len = 0, head_dim = 0;
  bool causal = false;
  double dropout_p = 0.0;
  // Backward only: core/determinism.h's deterministic_algorithms() at the call.
  bool deterministic = false;
  // Every operand's data pointer and row strides allow 16-byte loads (the alignment the
  // graph's tensors declare).
  bool aligned_16 = true;
  enum Operand { Q, K, V, Output, GradOutput, GradQ, GradK, GradV, kOperands };
  std::array<std::array<int64_t, 3>, kOperands> strides{};
};

// Why cuDNN's SDPA as memgrad builds it cannot run `problem` (a sentence fit for an
// error message), or nullptr when it may: float16 / bfloat16, no dropout, head dim a
// multiple of 8 in [8, 128], nonempty sequences, aligned operands. cuDNN itself may still
// offer no engine (an answer the plan cache keeps, cuda/cudnn/attention_plans.h).
const char* cudnn_attention_unsupported_reason(const AttentionProblem& problem);

// Everything a cuDNN plan (and Auto's choice) depends on: direction, device, dtype,
// sizes, causal, deterministic and the strides. Not the scale: it is passed by value at
// each run.
struct AttentionKey {
  std::array<int64_t, 10 + 3 * AttentionProblem::kOperands> fields{};
  bool operator==(const AttentionKey& other) const = default;
};
AttentionKey make_attention_key(const AttentionProblem& problem, Device device);
struct AttentionKeyHash {
  size_t operator()(const AttentionKey& key) const;
};

}  // namespace mg::cuda
