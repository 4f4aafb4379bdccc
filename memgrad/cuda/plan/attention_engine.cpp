// cuda/plan/attention_engine.cpp — the attention engine setting, its parsing, and the
// host rules of cuDNN's SDPA (see the header).
#include "memgrad/cuda/plan/attention_engine.h"

#include <atomic>
#include <string>

#include "memgrad/core/error.h"

namespace mg::cuda {

namespace {

std::atomic<AttentionEngine> engine_setting{AttentionEngine::Auto};  // see the header's NOTE

}  // namespace

void set_attention_engine(AttentionEngine engine) { engine_setting.store(engine, std::memory_order_relaxed); }
AttentionEngine attention_engine() { return engine_setting.load(std::memory_order_relaxed); }

const char* attention_engine_name(AttentionEngine engine) {
  switch (engine) {
    case AttentionEngine::Own: return "own";
    case AttentionEngine::Cudnn: return "cudnn";
    case AttentionEngine::Auto: return "auto";
  }
  return "?";
}

AttentionEngine parse_attention_engine(std::string_view text) {
  for (AttentionEngine engine : {AttentionEngine::Own, AttentionEngine::Cudnn, AttentionEngine::Auto}) {
    if (text == attention_engine_name(engine)) return engine;
  }
  MG_CHECK(false, "unknown attention engine '", std::string(text),
           "': expected own (memgrad's FlashAttention-2 kernels), cudnn (cuDNN's fused flash attention) or auto "
           "(the faster of the two per problem, timed once)");
  return AttentionEngine::Auto;
}

const char* cudnn_attention_unsupported_reason(const AttentionProblem& problem) {
  if (problem.dtype != DType::Float16 && problem.dtype != DType::BFloat16) {
    return "cuDNN's fused attention takes float16 or bfloat16 only";
  }
  if (problem.dropout_p > 0.0) {
    return "memgrad builds cuDNN's fused attention without dropout (its dropout mask differs from memgrad's "
           "Philox contract, AttentionParams)";
  }
  if (problem.head_dim % 8 != 0 || problem.head_dim < 8 || problem.head_dim > 128) {
    return "memgrad runs cuDNN's fused attention for head dims that are multiples of 8 in [8, 128] only";
  }
  if (problem.batch * problem.heads * problem.query_len * problem.key_len == 0) {
    return "an empty attention (some size is 0) is answered without a kernel";
  }
  if (!problem.aligned_16) {
    return "cuDNN's fused attention needs 16-byte aligned operands (data pointers and row strides)";
  }
  return nullptr;
}

AttentionKey make_attention_key(const AttentionProblem& problem, Device device) {
  AttentionKey key;
  size_t i = 0;
  auto put = [&](int64_t value) { key.fields[i++] = value; };
  put(static_cast<int64_t>(problem.direction));
  put(device.index);
  put(static_cast<int64_t>(problem.dtype));
  for (int64_t size : {problem.batch, problem.heads, problem.query_len, problem.key_len, problem.head_dim}) put(size);
  put(problem.causal ? 1 : 0);
  put(problem.deterministic ? 1 : 0);
  for (const auto& strides : problem.strides) {
    for (int64_t stride : strides) put(stride);
  }
  MG_ASSERT(i == key.fields.size(), "AttentionKey holds ", key.fields.size(), " fields, filled ", i);
  return key;
}

size_t AttentionKeyHash::operator()(const AttentionKey& key) const {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over 64-bit words, as ConvKeyHash
  for (int64_t field : key.fields) {
    hash ^= static_cast<uint64_t>(field);
    hash *= 0x100000001b3ull;
  }
  return static_cast<size_t>(hash ^ (hash >> 32));
}

}  // namespace mg::cuda
