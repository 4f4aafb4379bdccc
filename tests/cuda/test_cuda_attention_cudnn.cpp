// tests/cuda/test_cuda_attention_cudnn.cpp — cuDNN's fused attention as the second engine
// of the kernel table's attention entries (cuda/cudnn/attention_graph.h, cuda/
// attention_engine_choice.h), against our own kernels and the CPU reference.
//
// Each comparison says its case (B, H, Tq, Tk, D, dtype, causal) and its step (forward
// output, log_sum_exp, backward grad_q/k/v, which engine ran which step):
// - forced cuDNN, forward then backward, against our kernels on the same operands and
//   against kernels(cpu) in float32 on the same rounded values: bfloat16 and float16,
//   causal or not, D 64 and 128, T 1024 and 77, Tq != Tk (77 / 200 both ways); q, k, v
//   slots of one packed (B, T, 3, H, D) projection as the GPT makes them (k, v of a
//   (B, Tk, 2, H, D) one when Tq != Tk), outputs and gradients (B, T, H, D) memory seen as
//   (B, H, T, D). Tolerance max |x - reference| <= tol x max |reference|, tol 1e-2 for
//   bfloat16 and 3e-3 for float16 (tests/cuda/test_cuda_attention.cpp's, for the same
//   rounding of P and dS to the dtype); log_sum_exp within 1e-4 (float32 sums).
//   Where cuDNN offers no engine for Tq != Tk, the forced call's error must say so, and
//   the test WARNs that the case ran nothing.
// - the log_sum_exp exchanged: cuDNN's forward feeding our backward, and ours feeding
//   cuDNN's, each against the CPU backward from the same output and log_sum_exp.
// - the setting's errors: a forced cuDNN engine on float32, with dropout, or on operands
//   off 16-byte alignment throws an mg::Error naming the reason; Auto runs those on our
//   kernels silently (its results equal the Own engine's bit for bit).
// - Auto: the first call of a problem records one choice (Own or Cudnn), later calls keep
//   it, and the result equals that engine's forced result bit for bit (forward).
// - determinism: under set_deterministic_algorithms(true) Auto records no backward choice
//   (our deterministic kernels run) and a forced cuDNN backward gives the same bits twice.
// - a CUDA graph: forward and backward through forced cuDNN captured with CapturedStep and
//   replayed give the eager results.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "memgrad/autograd/shape.h"
#include "memgrad/core/determinism.h"
#include "memgrad/core/factory.h"
#include "memgrad/cuda/attention_engine_choice.h"
#include "memgrad/cuda/captured_step.h"
#include "memgrad/cuda/cudnn/settings.h"
#include "memgrad/cuda/plan/attention_engine.h"
#include "cuda/kernel_checks.h"

using namespace mg;
using cuda::AttentionEngine;
using cuda_checks::host_values;
using cuda_checks::kCuda;

namespace {

struct Case {
  int64_t batch, heads, query_len, key_len, head_dim;
};

std::string describe(const Case& c, DType dtype, bool causal) {
  std::ostringstream text;
  text << "B " << c.batch << " H " << c.heads << " Tq " << c.query_len << " Tk " << c.key_len << " D " << c.head_dim
       << " " << dtype_name(dtype) << (causal ? " causal" : " not causal");
  return text.str();
}

double tolerance(DType dtype) { return dtype == DType::BFloat16 ? 1e-2 : 3e-3; }

// max |actual - expected| <= tol x max |expected| (plus a hair for all-zero tensors).
void check_relative(const Tensor& actual, const Tensor& expected, double tol, const std::string& step) {
  INFO("step: " << step);
  REQUIRE(actual.sizes() == expected.sizes());
  const std::vector<double> got = host_values(actual), want = host_values(expected);
  double scale = 0.0, worst = 0.0;
  size_t worst_at = 0;
  for (double value : want) scale = std::max(scale, std::abs(value));
  for (size_t i = 0; i < want.size(); ++i) {
    const double difference = std::abs(got[i] - want[i]);
    if (!(difference <= worst)) {  // NaN counts as the worst
      worst = std::isnan(difference) ? INFINITY : difference;
      worst_at = i;
    }
  }
  INFO("largest difference " << worst << " at " << worst_at << " (got " << got[worst_at] << ", want "
                             << want[worst_at] << ") against scale " << scale);
  CHECK(worst <= tol * scale + 1e-6);
}

void check_same_bits(const Tensor& a, const Tensor& b, const std::string& step) {
  INFO("step: " << step);
  CHECK(host_values(a) == host_values(b));
}

// Restores the engine setting and determinism however a test ends.
struct SettingsGuard {
  AttentionEngine engine = cuda::attention_engine();
  bool deterministic = deterministic_algorithms();
  ~SettingsGuard() {
    cuda::set_attention_engine(engine);
    set_deterministic_algorithms(deterministic);
  }
};

Tensor normal_values(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return converted_copy(randn(sizes, {.dtype = DType::Float64}, &generator), dtype, Device::cpu());
}

Tensor heads_first(const Tensor& rows_first) { return transpose(rows_first, 1, 2); }

// q, k, v as the GPT's views of packed projections, and grad_output, on the GPU.
struct Operands {
  Tensor q, k, v, grad_output;
};
Operands gpt_operands(const Case& c, DType dtype, uint64_t seed) {
  Operands result;
  if (c.query_len == c.key_len) {
    Tensor packed = normal_values({c.batch, c.query_len, 3, c.heads, c.head_dim}, dtype, seed).to(kCuda);
    result = {heads_first(select(packed, 2, 0)), heads_first(select(packed, 2, 1)), heads_first(select(packed, 2, 2)),
              Tensor()};
  } else {
    Tensor q_rows = normal_values({c.batch, c.query_len, c.heads, c.head_dim}, dtype, seed).to(kCuda);
    Tensor kv = normal_values({c.batch, c.key_len, 2, c.heads, c.head_dim}, dtype, seed + 1).to(kCuda);
    result = {heads_first(q_rows), heads_first(select(kv, 2, 0)), heads_first(select(kv, 2, 1)), Tensor()};
  }
  result.grad_output =
      heads_first(normal_values({c.batch, c.query_len, c.heads, c.head_dim}, dtype, seed + 2).to(kCuda));
  return result;
}

// (B, H, T, D) views of (B, T, H, D) buffers filled with 7, which the engine must overwrite.
Tensor result_rows(const Case& c, int64_t length, DType dtype) {
  return heads_first(full({c.batch, length, c.heads, c.head_dim}, 7.0, {.dtype = dtype, .device = kCuda}));
}

struct Forward {
  Tensor output, log_sum_exp;
};
struct Backward {
  Tensor grad_q, grad_k, grad_v;
};

AttentionParams params_of(const Case& c, bool causal, double dropout_p = 0.0) {
  return {.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim)), .is_causal = causal, .dropout_p = dropout_p,
          .rng = {.seed = 5, .offset = 0}};
}

Forward forward_on(AttentionEngine engine, const Case& c, const Operands& ops, const AttentionParams& params) {
  cuda::set_attention_engine(engine);
  Forward result{result_rows(c, c.query_len, ops.q.dtype()),
                 full({c.batch, c.heads, c.query_len}, 7.0, {.device = kCuda})};
  kernels(kCuda).attention_forward(ops.q, ops.k, ops.v, params, result.output, result.log_sum_exp);
  return result;
}

Backward backward_on(AttentionEngine engine, const Case& c, const Operands& ops, const Forward& forward,
                     const AttentionParams& params) {
  cuda::set_attention_engine(engine);
  const DType dtype = ops.q.dtype();
  Backward result{result_rows(c, c.query_len, dtype), result_rows(c, c.key_len, dtype),
                  result_rows(c, c.key_len, dtype)};
  kernels(kCuda).attention_backward(ops.grad_output, ops.q, ops.k, ops.v, forward.output, forward.log_sum_exp,
                                    params, result.grad_q, result.grad_k, result.grad_v);
  return result;
}

Tensor cpu32(const Tensor& tensor) { return converted_copy(tensor, DType::Float32, Device::cpu()); }

Forward cpu_forward(const Case& c, const Operands& ops, const AttentionParams& params) {
  Forward result{empty({c.batch, c.heads, c.query_len, c.head_dim}), empty({c.batch, c.heads, c.query_len})};
  kernels(Device::cpu()).attention_forward(cpu32(ops.q), cpu32(ops.k), cpu32(ops.v), params, result.output,
                                           result.log_sum_exp);
  return result;
}

// The CPU backward from a GPU forward's output and log_sum_exp.
Backward cpu_backward(const Operands& ops, const Forward& forward, const AttentionParams& params) {
  Backward result{empty(ops.q.sizes()), empty(ops.k.sizes()), empty(ops.v.sizes())};
  kernels(Device::cpu()).attention_backward(cpu32(ops.grad_output), cpu32(ops.q), cpu32(ops.k), cpu32(ops.v),
                                            cpu32(forward.output), forward.log_sum_exp.to(Device::cpu()), params,
                                            result.grad_q, result.grad_k, result.grad_v);
  return result;
}

void check_backward(const Backward& actual, const Backward& expected, double tol, const std::string& step) {
  check_relative(actual.grad_q, expected.grad_q, tol, step + " grad_q");
  check_relative(actual.grad_k, expected.grad_k, tol, step + " grad_k");
  check_relative(actual.grad_v, expected.grad_v, tol, step + " grad_v");
}

// Whether forced cuDNN runs this case: true, or false after checking that the error is
// cuDNN's "no engine" answer (reported with WARN; only for Tq != Tk, where that is allowed).
bool cudnn_runs(const Case& c, const Operands& ops, const AttentionParams& params) {
  try {
    forward_on(AttentionEngine::Cudnn, c, ops, params);
    return true;
  } catch (const Error& error) {
    INFO("forced cuDNN forward threw: " << error.what());
    CHECK(c.query_len != c.key_len);
    CHECK_THAT(std::string(error.what()), Catch::Matchers::Contains("cuDNN offered no engine"));
    WARN("cuDNN offered no engine for " << c.query_len << " queries and " << c.key_len << " keys: case not run");
    return false;
  }
}

// The GPU machine's build has cuDNN (tests/cuda/test_cuda_conv.cpp checks it too).
void require_cudnn() {
  INFO("these tests run cuDNN's fused attention: build with MG_WITH_CUDNN");
  REQUIRE(cuda::cudnn_is_available());
}

}  // namespace

TEST_CASE("cuDNN's fused attention matches our kernels and the CPU reference", "[cuda][attention][cudnn]") {
  require_cudnn();
  SettingsGuard guard;
  const Case c = GENERATE(Case{2, 3, 1024, 1024, 64}, Case{1, 2, 1024, 1024, 128}, Case{2, 3, 77, 77, 64},
                          Case{2, 2, 77, 77, 128}, Case{1, 2, 77, 200, 64}, Case{1, 2, 200, 77, 64});
  const DType dtype = GENERATE(DType::BFloat16, DType::Float16);
  const bool causal = GENERATE(false, true);
  INFO(describe(c, dtype, causal));
  const Operands ops = gpt_operands(c, dtype, 31);
  const AttentionParams params = params_of(c, causal);
  if (!cudnn_runs(c, ops, params)) return;

  const Forward cudnn = forward_on(AttentionEngine::Cudnn, c, ops, params);
  const Forward own = forward_on(AttentionEngine::Own, c, ops, params);
  const Forward cpu = cpu_forward(c, ops, params);
  check_relative(cudnn.output, own.output, tolerance(dtype), "forward output, cuDNN against own");
  check_relative(cudnn.output, cpu.output, tolerance(dtype), "forward output, cuDNN against CPU");
  check_relative(cudnn.log_sum_exp, own.log_sum_exp, 1e-4, "forward log_sum_exp, cuDNN against own");
  check_relative(cudnn.log_sum_exp, cpu.log_sum_exp, 1e-4, "forward log_sum_exp, cuDNN against CPU");

  // Backward, every side from our forward's output and log_sum_exp.
  const Backward cudnn_grads = backward_on(AttentionEngine::Cudnn, c, ops, own, params);
  const Backward own_grads = backward_on(AttentionEngine::Own, c, ops, own, params);
  check_backward(cudnn_grads, own_grads, tolerance(dtype), "backward, cuDNN against own");
  check_backward(cudnn_grads, cpu_backward(ops, own, params), tolerance(dtype), "backward, cuDNN against CPU");
}

TEST_CASE("either engine's log_sum_exp feeds either engine's backward", "[cuda][attention][cudnn]") {
  require_cudnn();
  SettingsGuard guard;
  const Case c = GENERATE(Case{2, 3, 1024, 1024, 64}, Case{1, 2, 77, 77, 128});
  const bool causal = GENERATE(false, true);
  const DType dtype = DType::BFloat16;
  INFO(describe(c, dtype, causal));
  const Operands ops = gpt_operands(c, dtype, 41);
  const AttentionParams params = params_of(c, causal);

  const Forward from_cudnn = forward_on(AttentionEngine::Cudnn, c, ops, params);
  check_backward(backward_on(AttentionEngine::Own, c, ops, from_cudnn, params), cpu_backward(ops, from_cudnn, params),
                 tolerance(dtype), "cuDNN forward, own backward, against CPU backward");
  const Forward from_own = forward_on(AttentionEngine::Own, c, ops, params);
  check_backward(backward_on(AttentionEngine::Cudnn, c, ops, from_own, params), cpu_backward(ops, from_own, params),
                 tolerance(dtype), "own forward, cuDNN backward, against CPU backward");
}

TEST_CASE("a forced cuDNN attention engine names why it does not apply, and Auto falls back silently",
          "[cuda][attention][cudnn]") {
  require_cudnn();
  SettingsGuard guard;
  const Case c{1, 2, 64, 64, 64};
  struct Refused {
    const char* what;
    DType dtype;
    double dropout_p;
    bool misaligned;
    const char* reason;
  };
  const Refused refused = GENERATE(Refused{"float32", DType::Float32, 0.0, false, "float16 or bfloat16"},
                                   Refused{"dropout", DType::BFloat16, 0.2, false, "without dropout"},
                                   Refused{"misaligned", DType::Float16, 0.0, true, "16-byte aligned"});
  INFO("case: " << refused.what);
  Operands ops = gpt_operands(c, refused.dtype, 51);
  if (refused.misaligned) {  // q one element into a larger buffer: no row 16-byte aligned
    Tensor base = zeros({ops.q.numel() + 1}, {.dtype = refused.dtype, .device = kCuda});
    Tensor shifted = reshape(narrow(base, 0, 1, ops.q.numel()), ops.q.sizes());
    kernels(kCuda).copy(ops.q, shifted);
    ops.q = shifted;
  }
  const AttentionParams params = params_of(c, /*causal=*/true, refused.dropout_p);
  cuda::set_attention_engine(AttentionEngine::Cudnn);
  Tensor output = result_rows(c, c.query_len, refused.dtype);
  Tensor log_sum_exp = empty({c.batch, c.heads, c.query_len}, {.device = kCuda});
  CHECK_THROWS_WITH(kernels(kCuda).attention_forward(ops.q, ops.k, ops.v, params, output, log_sum_exp),
                    Catch::Matchers::Contains("attention engine is set to cudnn") &&
                        Catch::Matchers::Contains(refused.reason) && Catch::Matchers::Contains("Hint"));
  const Forward automatic = forward_on(AttentionEngine::Auto, c, ops, params);
  const Forward own = forward_on(AttentionEngine::Own, c, ops, params);
  check_same_bits(automatic.output, own.output, "Auto's forward output against Own's");
  check_same_bits(automatic.log_sum_exp, own.log_sum_exp, "Auto's log_sum_exp against Own's");
}

TEST_CASE("Auto times a problem once, keeps its choice, and runs the chosen engine", "[cuda][attention][cudnn]") {
  require_cudnn();
  SettingsGuard guard;
  const Case c{2, 3, 256, 256, 64};
  const Operands ops = gpt_operands(c, DType::BFloat16, 61);
  const AttentionParams params = params_of(c, /*causal=*/true);
  cuda::attention::clear_attention_engine_choices();
  const Forward first = forward_on(AttentionEngine::Auto, c, ops, params);
  REQUIRE(cuda::attention::attention_engine_choices() == 1);
  const cuda::AttentionProblem problem = cuda::attention::forward_problem(ops.q, ops.k, ops.v, params, first.output);
  const AttentionEngine chosen = cuda::attention::attention_engine_chosen(problem, kCuda);
  INFO("Auto chose " << cuda::attention_engine_name(chosen) << " for the forward");
  CHECK((chosen == AttentionEngine::Own || chosen == AttentionEngine::Cudnn));
  const Forward second = forward_on(AttentionEngine::Auto, c, ops, params);
  CHECK(cuda::attention::attention_engine_choices() == 1);
  CHECK(cuda::attention::attention_engine_chosen(problem, kCuda) == chosen);
  const Forward forced = forward_on(chosen, c, ops, params);
  check_same_bits(second.output, forced.output, "Auto's second forward output against the chosen engine's");
  check_same_bits(first.log_sum_exp, forced.log_sum_exp, "Auto's first log_sum_exp against the chosen engine's");
  // The backward is a problem of its own: one more choice.
  backward_on(AttentionEngine::Auto, c, ops, first, params);
  CHECK(cuda::attention::attention_engine_choices() == 2);
}

TEST_CASE("under deterministic algorithms Auto's backward stays on our kernels and cuDNN's repeats its bits",
          "[cuda][attention][cudnn]") {
  require_cudnn();
  SettingsGuard guard;
  set_deterministic_algorithms(true);
  const Case c{2, 3, 1024, 1024, 64};
  const Operands ops = gpt_operands(c, DType::BFloat16, 71);
  const AttentionParams params = params_of(c, /*causal=*/true);
  const Forward forward = forward_on(AttentionEngine::Own, c, ops, params);
  cuda::attention::clear_attention_engine_choices();
  const Backward automatic = backward_on(AttentionEngine::Auto, c, ops, forward, params);
  CHECK(cuda::attention::attention_engine_choices() == 0);
  const Backward own = backward_on(AttentionEngine::Own, c, ops, forward, params);
  check_same_bits(automatic.grad_q, own.grad_q, "Auto's deterministic grad_q against Own's");
  try {
    const Backward once = backward_on(AttentionEngine::Cudnn, c, ops, forward, params);
    const Backward twice = backward_on(AttentionEngine::Cudnn, c, ops, forward, params);
    check_same_bits(once.grad_q, twice.grad_q, "cuDNN's deterministic backward grad_q, two runs");
    check_same_bits(once.grad_k, twice.grad_k, "cuDNN's deterministic backward grad_k, two runs");
    check_same_bits(once.grad_v, twice.grad_v, "cuDNN's deterministic backward grad_v, two runs");
    check_backward(once, own, tolerance(DType::BFloat16), "cuDNN's deterministic backward against own");
  } catch (const Error& error) {
    CHECK_THAT(std::string(error.what()), Catch::Matchers::Contains("deterministic"));
    WARN("cuDNN offered no deterministic backward engine: " << error.what());
  }
}

TEST_CASE("cuDNN's attention plans replay in a CUDA graph", "[cuda][attention][cudnn]") {
  require_cudnn();
  SettingsGuard guard;
  const Case c{2, 3, 1024, 1024, 64};
  const Operands ops = gpt_operands(c, DType::BFloat16, 81);
  const AttentionParams params = params_of(c, /*causal=*/true);
  const Forward eager = forward_on(AttentionEngine::Cudnn, c, ops, params);
  const Backward eager_grads = backward_on(AttentionEngine::Cudnn, c, ops, eager, params);
  Forward captured{result_rows(c, c.query_len, DType::BFloat16), empty({c.batch, c.heads, c.query_len}, {.device = kCuda})};
  Backward captured_grads{result_rows(c, c.query_len, DType::BFloat16), result_rows(c, c.key_len, DType::BFloat16),
                          result_rows(c, c.key_len, DType::BFloat16)};
  cuda::set_attention_engine(AttentionEngine::Cudnn);
  cuda::CapturedStep step([&] {
    kernels(kCuda).attention_forward(ops.q, ops.k, ops.v, params, captured.output, captured.log_sum_exp);
    kernels(kCuda).attention_backward(ops.grad_output, ops.q, ops.k, ops.v, captured.output, captured.log_sum_exp,
                                      params, captured_grads.grad_q, captured_grads.grad_k, captured_grads.grad_v);
  });
  captured.output.fill_(7.0);
  captured_grads.grad_q.fill_(7.0);
  step.replay();
  check_same_bits(captured.output, eager.output, "replayed forward output against eager");
  check_same_bits(captured.log_sum_exp, eager.log_sum_exp, "replayed log_sum_exp against eager");
  // The backward adds dQ with atomics: equal within rounding, not bit for bit.
  check_backward(captured_grads, eager_grads, tolerance(DType::BFloat16), "replayed backward against eager");
}
