// tests/memory/test_attention_engine.cpp — the attention engine setting and cuDNN's
// fused attention rules (memgrad/cuda/plan/attention_engine.h), on the CPU: parsing and
// its errors, the setting's default and switching, which problems cuDNN may run (and the
// reason given for those it may not), and the plan key (what changes it, what does not).
// The engines themselves run in tests/cuda/test_cuda_attention_cudnn.cpp.
#include <catch2/catch.hpp>

#include <string>

#include "memgrad/core/error.h"
#include "memgrad/cuda/plan/attention_engine.h"

namespace {

using mg::Device;
using mg::DType;
using mg::cuda::AttentionDirection;
using mg::cuda::AttentionEngine;
using mg::cuda::AttentionProblem;

// GPT-2's attention: B 16, H 12, T 1024, D 64, bfloat16, causal, q/k/v slots of one
// packed (B, T, 3, H, D) projection, output and gradients (B, T, H, D).
AttentionProblem gpt2_problem(AttentionDirection direction) {
  AttentionProblem problem;
  problem.direction = direction;
  problem.dtype = DType::BFloat16;
  problem.batch = 16;
  problem.heads = 12;
  problem.query_len = problem.key_len = 1024;
  problem.head_dim = 64;
  problem.causal = true;
  const std::array<int64_t, 3> packed{1024 * 3 * 12 * 64, 64, 3 * 12 * 64};
  const std::array<int64_t, 3> rows_first{1024 * 12 * 64, 64, 12 * 64};
  for (auto operand : {AttentionProblem::Q, AttentionProblem::K, AttentionProblem::V}) problem.strides[operand] = packed;
  for (auto operand : {AttentionProblem::Output, AttentionProblem::GradOutput, AttentionProblem::GradQ,
                       AttentionProblem::GradK, AttentionProblem::GradV}) {
    problem.strides[operand] = rows_first;
  }
  return problem;
}

// Restores the process-wide setting however a test ends.
struct EngineSettingGuard {
  AttentionEngine saved = mg::cuda::attention_engine();
  ~EngineSettingGuard() { mg::cuda::set_attention_engine(saved); }
};

}  // namespace

TEST_CASE("attention engine names parse both ways, and anything else names the three", "[attention][engine]") {
  for (AttentionEngine engine : {AttentionEngine::Own, AttentionEngine::Cudnn, AttentionEngine::Auto}) {
    CHECK(mg::cuda::parse_attention_engine(mg::cuda::attention_engine_name(engine)) == engine);
  }
  CHECK(std::string(mg::cuda::attention_engine_name(AttentionEngine::Cudnn)) == "cudnn");
  for (const char* bad : {"", "CUDNN", "flash", "own "}) {
    INFO("text '" << bad << "'");
    CHECK_THROWS_AS(mg::cuda::parse_attention_engine(bad), mg::Error);
    CHECK_THROWS_WITH(mg::cuda::parse_attention_engine(bad),
                      Catch::Matchers::Contains("unknown attention engine '" + std::string(bad) + "'") &&
                          Catch::Matchers::Contains("own") && Catch::Matchers::Contains("cudnn") &&
                          Catch::Matchers::Contains("auto"));
  }
}

TEST_CASE("the attention engine is Auto by default and switches", "[attention][engine]") {
  EngineSettingGuard guard;
  // NOTE: the default as the process starts; a test run before this one would have
  // restored it through its own guard.
  CHECK(mg::cuda::attention_engine() == AttentionEngine::Auto);
  mg::cuda::set_attention_engine(AttentionEngine::Own);
  CHECK(mg::cuda::attention_engine() == AttentionEngine::Own);
  mg::cuda::set_attention_engine(AttentionEngine::Cudnn);
  CHECK(mg::cuda::attention_engine() == AttentionEngine::Cudnn);
}

TEST_CASE("cuDNN's fused attention applies to GPT-2's attention and says why not elsewhere", "[attention][engine]") {
  const AttentionProblem gpt2 = gpt2_problem(AttentionDirection::Backward);
  CHECK(mg::cuda::cudnn_attention_unsupported_reason(gpt2) == nullptr);
  AttentionProblem fp16 = gpt2;
  fp16.dtype = DType::Float16;
  fp16.head_dim = 128;
  fp16.key_len = 77;
  fp16.causal = false;
  CHECK(mg::cuda::cudnn_attention_unsupported_reason(fp16) == nullptr);

  auto reason_for = [&](auto change) {
    AttentionProblem problem = gpt2;
    change(problem);
    const char* reason = mg::cuda::cudnn_attention_unsupported_reason(problem);
    return std::string(reason == nullptr ? "(applies)" : reason);
  };
  CHECK_THAT(reason_for([](AttentionProblem& p) { p.dtype = DType::Float32; }),
             Catch::Matchers::Contains("float16 or bfloat16"));
  CHECK_THAT(reason_for([](AttentionProblem& p) { p.dropout_p = 0.1; }), Catch::Matchers::Contains("dropout"));
  for (int64_t head_dim : {4, 12, 136, 256}) {
    INFO("head dim " << head_dim);
    CHECK_THAT(reason_for([&](AttentionProblem& p) { p.head_dim = head_dim; }),
               Catch::Matchers::Contains("multiples of 8 in [8, 128]"));
  }
  CHECK_THAT(reason_for([](AttentionProblem& p) { p.key_len = 0; }), Catch::Matchers::Contains("empty"));
  CHECK_THAT(reason_for([](AttentionProblem& p) { p.aligned_16 = false; }), Catch::Matchers::Contains("16-byte"));
}

TEST_CASE("the attention plan key holds what a plan depends on, and not the scale", "[attention][engine]") {
  const Device gpu0 = Device::cuda(0);
  const AttentionProblem base = gpt2_problem(AttentionDirection::Backward);
  const auto key = mg::cuda::make_attention_key(base, gpu0);
  const mg::cuda::AttentionKeyHash hash;
  CHECK(key == mg::cuda::make_attention_key(base, gpu0));
  CHECK(hash(key) == hash(mg::cuda::make_attention_key(base, gpu0)));
  // The scale is passed by value at each run and the dropout rule keeps it out of cuDNN.
  CHECK(key == mg::cuda::make_attention_key(gpt2_problem(AttentionDirection::Backward), gpu0));

  auto differs = [&](auto change, Device device) {
    AttentionProblem problem = base;
    change(problem);
    return !(mg::cuda::make_attention_key(problem, device) == key);
  };
  CHECK(differs([](AttentionProblem&) {}, Device::cuda(1)));
  CHECK(differs([](AttentionProblem& p) { p.direction = AttentionDirection::Forward; }, gpu0));
  CHECK(differs([](AttentionProblem& p) { p.dtype = DType::Float16; }, gpu0));
  CHECK(differs([](AttentionProblem& p) { p.batch = 8; }, gpu0));
  CHECK(differs([](AttentionProblem& p) { p.heads = 6; }, gpu0));
  CHECK(differs([](AttentionProblem& p) { p.query_len = 77; }, gpu0));
  CHECK(differs([](AttentionProblem& p) { p.key_len = 77; }, gpu0));
  CHECK(differs([](AttentionProblem& p) { p.head_dim = 128; }, gpu0));
  CHECK(differs([](AttentionProblem& p) { p.causal = false; }, gpu0));
  CHECK(differs([](AttentionProblem& p) { p.deterministic = true; }, gpu0));
  for (int operand = 0; operand < AttentionProblem::kOperands; ++operand) {
    for (int dim = 0; dim < 3; ++dim) {
      INFO("operand " << operand << " stride " << dim);
      CHECK(differs([&](AttentionProblem& p) { p.strides[operand][dim] += 8; }, gpu0));
    }
  }
}
