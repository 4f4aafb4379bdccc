// tests/cuda/test_cuda_gpt.cpp — the GPT-2 model (nn/gpt.h) on a GPU: float32 logits and
// every parameter's gradient against the CPU model with the same weights; under bfloat16
// autocast the fused and the math attention path against each other and against float32;
// checkpointed blocks against plain ones; a token id outside the vocabulary reported at the
// next synchronisation with the device usable afterwards; and the fused path's output
// reaching c_proj as a view, not a copy.
//
// The model: 2 layers, 4 heads of 64 dims (GPT-2's head size), 256 wide, vocabulary 100,
// 64 positions; batches of (2, 61) tokens, T not a multiple of the kernels' tiles. Its
// weights are nanoGPT's initialisation plus normal(0, 0.1) noise: with GPT-2's 0.02 alone
// the attention scores are ~0.03 and every softmax row nearly uniform, which would hide a
// mistake in the attention paths. The loss sum(logits * w), w a fixed normal (B, T, V)
// tensor, gives every parameter a gradient of order one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "amp/autocast_checks.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "autograd/tensor_checks.h"
#include "memgrad/autograd/split.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"
#include "cuda/kernel_checks.h"
#include "memgrad/cuda/runtime.h"
#include "memgrad/nn/nn.h"

using namespace mg;

namespace {

using cuda_checks::kCuda;
using mg_test::check_close_to_largest;
using mg_test::contains;
using mg_test::error_message;

constexpr int64_t kBatch = 2, kSequence = 61, kVocab = 100;

// Tolerances are relative to the largest |value| of the expected tensor
// (check_close_to_largest), and were measured on this model on the CPU (its float64 run, and
// its bfloat16 autocast run through both paths, seeds 1 to 10).
// float32, CPU against CUDA: float32 against float64 differs by at most 4e-6 there; CUDA adds
// another order of the same sums (GEMM tiling, the embedding backward's atomic adds). 1e-4
// leaves room and still catches any real mistake, which moves values by their own size.
constexpr double kFloat32Tolerance = 1e-4;
// bfloat16 autocast against float32, and fused against math under autocast: every product's
// output is rounded to bfloat16 (8 significant bits), a dozen roundings deep each way, and the
// math path also rounds the scores and the softmax weights. Measured: logits within 1.6e-2,
// gradients within 4.1e-2 (the worst element of the worst tensor).
constexpr double kBFloat16LogitsTolerance = 5e-2;
constexpr double kBFloat16GradientTolerance = 1e-1;

// A float32 matmul on CUDA must not use TF32 (10 mantissa bits) here: it is off by default,
// and this keeps it off whatever another test left set.
class NoTF32 {
 public:
  NoTF32() : previous_(cuda::allow_tf32()) { cuda::set_allow_tf32(false); }
  ~NoTF32() { cuda::set_allow_tf32(previous_); }

 private:
  bool previous_;
};

nn::GPTOptions small_options(AttentionBackend attention = AttentionBackend::Auto,
                             nn::BlockCheckpoint checkpoint = nn::BlockCheckpoint::None) {
  nn::GPTOptions options;
  options.n_layer = 2;
  options.n_head = 4;
  options.n_embd = 256;
  options.block_size = 64;
  options.vocab_size = kVocab;
  options.attention = attention;
  options.checkpoint = checkpoint;
  return options;
}

// The same weights for the same seed, drawn on the CPU, then moved to `device`.
std::shared_ptr<nn::GPT> make_gpt(const nn::GPTOptions& options, Device device, uint64_t seed = 1) {
  Generator generator(seed);
  auto model = std::make_shared<nn::GPT>(options, &generator);
  for (const Tensor& parameter : model->parameters()) {
    parameter.detach().add_(randn(parameter.sizes(), {}, &generator), 0.1);
  }
  model->to(device);
  return model;
}

Tensor random_tokens(uint64_t seed) {
  Generator generator(seed);
  return randint(0, kVocab, {kBatch, kSequence}, {.dtype = DType::Int64}, &generator);
}

Tensor output_weights(uint64_t seed) {
  Generator generator(seed);
  return randn({kBatch, kSequence, kVocab}, {}, &generator);
}

// One forward and backward of sum(logits * weights), under bfloat16 autocast on CUDA when
// asked (backward outside the region, as PyTorch recommends).
struct Run {
  Tensor logits;              // (B, T, V), detached
  nn::NamedTensors gradients;  // every parameter's, in named_parameters() order
};

Run run_model(nn::GPT& model, const Tensor& tokens, const Tensor& weights, bool autocast) {
  Run run;
  Tensor loss;
  {
    amp::AutocastGuard guard(DType::BFloat16, DeviceType::CUDA, /*enabled=*/autocast);
    run.logits = model(tokens);
    loss = sum(mul(run.logits, weights));
  }
  loss.backward();
  run.logits = run.logits.detach();
  for (const auto& [name, parameter] : model.named_parameters()) {
    REQUIRE(parameter.grad().defined());
    run.gradients.emplace_back(name, parameter.grad());
  }
  return run;
}

// Values drawn on the CPU, as bfloat16 on the GPU.
Tensor bfloat16_on_cuda(const Tensor& values) { return values.to(DType::BFloat16).to(kCuda); }

double largest_magnitude(const Tensor& tensor) {
  double largest = 0.0;
  for (double value : cuda_checks::host_values(tensor)) largest = std::max(largest, std::abs(value));
  return largest;
}

// FlashAttention's test of its kernels: against the float32 result, the fused path's largest
// error is at most twice the math path's (plus 0.5% of the largest value, for a tensor that
// the math path happens to get almost exactly). Measured on the CPU: at most 1.4 times.
void check_fused_error_within_math_error(const Run& fused, const Run& math, const Run& float32) {
  auto check = [](const Tensor& fused_value, const Tensor& math_value, const Tensor& reference) {
    const double fused_error = mg_test::max_abs_difference(fused_value, reference);
    const double math_error = mg_test::max_abs_difference(math_value, reference);
    INFO("largest error: fused " << fused_error << ", math " << math_error << ", largest |float32 value| "
                                 << largest_magnitude(reference));
    CHECK(fused_error <= 2.0 * math_error + 5e-3 * largest_magnitude(reference));
  };
  {
    INFO("logits");
    check(fused.logits, math.logits, float32.logits);
  }
  for (size_t i = 0; i < float32.gradients.size(); ++i) {
    INFO("gradient of " << float32.gradients[i].first);
    check(fused.gradients[i].second, math.gradients[i].second, float32.gradients[i].second);
  }
}

void check_same_run(const Run& actual, const Run& expected, double logits_tolerance, double gradient_tolerance) {
  {
    INFO("logits");
    check_close_to_largest(actual.logits, expected.logits, logits_tolerance);
  }
  REQUIRE(actual.gradients.size() == expected.gradients.size());
  for (size_t i = 0; i < expected.gradients.size(); ++i) {
    INFO("gradient of " << expected.gradients[i].first);
    REQUIRE(actual.gradients[i].first == expected.gradients[i].first);
    check_close_to_largest(actual.gradients[i].second, expected.gradients[i].second, gradient_tolerance);
  }
}

}  // namespace

TEST_CASE("CUDA GPT in float32: logits and every gradient match the CPU model with the same weights",
          "[cuda][gpt]") {
  NoTF32 no_tf32;
  auto cpu_model = make_gpt(small_options(), Device::cpu());
  auto cuda_model = make_gpt(small_options(), kCuda);
  // 2 + 2 * 12 + 2 tensors, the tied table once; copies of the same values.
  nn::NamedTensors cpu_parameters = cpu_model->named_parameters(), cuda_parameters = cuda_model->named_parameters();
  REQUIRE(cuda_parameters.size() == 28);
  for (size_t i = 0; i < cpu_parameters.size(); ++i) {
    INFO(cpu_parameters[i].first);
    CHECK(cuda_parameters[i].second.device() == kCuda);
    CHECK(mg_test::max_abs_difference(cuda_parameters[i].second.to(Device::cpu()), cpu_parameters[i].second) == 0.0);
  }
  CHECK(cuda_model->lm_head->weight.is_same(cuda_model->transformer->wte->weight));

  const Tensor tokens = random_tokens(2), weights = output_weights(3);
  const Run cpu = run_model(*cpu_model, tokens, weights, /*autocast=*/false);
  const Run cuda = run_model(*cuda_model, tokens.to(kCuda), weights.to(kCuda), /*autocast=*/false);
  CHECK(cuda.logits.device() == kCuda);
  CHECK(cuda.logits.dtype() == DType::Float32);
  CHECK(cuda.logits.sizes() == Shape{kBatch, kSequence, kVocab});
  check_same_run(cuda, cpu, kFloat32Tolerance, kFloat32Tolerance);
}

TEST_CASE("CUDA GPT under bfloat16 autocast: fused and math attention agree with each other and with float32",
          "[cuda][gpt][amp]") {
  NoTF32 no_tf32;
  const Tensor tokens = random_tokens(4).to(kCuda), weights = output_weights(5).to(kCuda);
  auto float32_model = make_gpt(small_options(), kCuda);
  auto fused_model = make_gpt(small_options(AttentionBackend::Fused), kCuda);
  auto math_model = make_gpt(small_options(AttentionBackend::Math), kCuda);
  const Run float32 = run_model(*float32_model, tokens, weights, /*autocast=*/false);
  const Run fused = run_model(*fused_model, tokens, weights, /*autocast=*/true);
  const Run math = run_model(*math_model, tokens, weights, /*autocast=*/true);

  // Autocast: the head is a product, so the logits are bfloat16; the master weights' gradients
  // float32.
  CHECK(fused.logits.dtype() == DType::BFloat16);
  CHECK(math.logits.dtype() == DType::BFloat16);
  CHECK(fused.gradients.front().second.dtype() == DType::Float32);
  // Auto takes the fused path for these bfloat16 heads on CUDA (head_dim 64).
  {
    amp::AutocastGuard guard(DType::BFloat16, DeviceType::CUDA);
    const Tensor head = zeros({kBatch, 4, kSequence, 64}, {.device = kCuda});
    CHECK(attention_backend_for(head, head, head) == AttentionBackend::Fused);
  }

  SECTION("fused against math") { check_same_run(fused, math, kBFloat16LogitsTolerance, kBFloat16GradientTolerance); }
  SECTION("each against float32") {
    check_same_run(fused, float32, kBFloat16LogitsTolerance, kBFloat16GradientTolerance);
    check_same_run(math, float32, kBFloat16LogitsTolerance, kBFloat16GradientTolerance);
  }
  SECTION("the fused path's error is at most twice the math path's") {
    check_fused_error_within_math_error(fused, math, float32);
  }
}

TEST_CASE("CUDA GPT: checkpointed and offloaded blocks give the plain model's logits and gradients",
          "[cuda][gpt][checkpoint]") {
  NoTF32 no_tf32;
  const Tensor tokens = random_tokens(6).to(kCuda), weights = output_weights(7).to(kCuda);
  for (const nn::BlockCheckpoint mode : {nn::BlockCheckpoint::Whole, nn::BlockCheckpoint::Offload}) {
    INFO("--checkpoint " << nn::block_checkpoint_name(mode));
    SECTION(std::string("float32, math attention, ") + nn::block_checkpoint_name(mode)) {
      const Run plain = run_model(*make_gpt(small_options(), kCuda), tokens, weights, false);
      const Run checkpointed =
          run_model(*make_gpt(small_options(AttentionBackend::Auto, mode), kCuda), tokens, weights, false);
      // The recompute (or the copy back) gives the same kernels the same inputs: the logits
      // are identical. The gradients differ only by the order of the embedding backward's
      // atomic adds.
      check_same_run(checkpointed, plain, 0.0, 1e-5);
    }
    SECTION(std::string("bfloat16 autocast, fused attention, ") + nn::block_checkpoint_name(mode)) {
      const Run plain = run_model(*make_gpt(small_options(AttentionBackend::Fused), kCuda), tokens, weights, true);
      const Run checkpointed =
          run_model(*make_gpt(small_options(AttentionBackend::Fused, mode), kCuda), tokens, weights, true);
      // The recompute runs under the forward's autocast state. The fused backward adds dQ with
      // atomics, so a bfloat16 rounding may land one ulp (2^-8 of a value) apart.
      check_same_run(checkpointed, plain, 0.0, 1.6e-2);
    }
  }
}

TEST_CASE("CUDA GPT: a token id outside the vocabulary is an mg::Error at the next synchronisation",
          "[cuda][gpt]") {
  NoTF32 no_tf32;
  auto model = make_gpt(small_options(), kCuda);
  const Tensor tokens = random_tokens(8), weights = output_weights(9).to(kCuda);
  const Run reference = run_model(*model, tokens.to(kCuda), weights, false);
  for (const auto& entry : model->named_parameters()) entry.second.set_grad(Tensor());

  // Token (1, 20), flat position 61 + 20 = 81, is the vocabulary size: one past the table.
  Tensor bad_tokens = tokens.clone();
  bad_tokens.select(0, 1).select(0, 20).fill_(static_cast<double>(kVocab));
  Tensor logits;
  // The lookup does not wait for the device, so the forward cannot know yet.
  CHECK_NOTHROW(logits = (*model)(bad_tokens.to(kCuda)));
  const std::string message = error_message([] { cuda::synchronize(); });
  INFO(message);
  CHECK(contains(message, "embedding: index 100 is out of range for an embedding of 100 rows (weight shape [100, "
                          "256]); it is at position 81 of the flattened indices"));
  CHECK(contains(message, "Hint: every index must lie in [0, 100)"));
  CHECK_NOTHROW(cuda::synchronize());  // reported once

  // The bad token's row read as zeros; causal attention keeps it out of every earlier
  // position, so those logits (and all of the first sequence's) are the reference's.
  const Tensor bad_logits = logits.detach().to(Device::cpu()), reference_logits = reference.logits.to(Device::cpu());
  CHECK(mg_test::max_abs_difference(narrow(bad_logits, 0, 0, 1), narrow(reference_logits, 0, 0, 1)) == 0.0);
  CHECK(mg_test::max_abs_difference(narrow(narrow(bad_logits, 0, 1, 1), 1, 0, 20),
                                    narrow(narrow(reference_logits, 0, 1, 1), 1, 0, 20)) == 0.0);
  CHECK(mg_test::max_abs_difference(narrow(narrow(bad_logits, 0, 1, 1), 1, 20, 1),
                                    narrow(narrow(reference_logits, 0, 1, 1), 1, 20, 1)) > 1e-3);

  // The device stays usable: a good step afterwards is the reference step.
  const Run again = run_model(*model, tokens.to(kCuda), weights, false);
  check_same_run(again, reference, 0.0, 1e-5);
}

TEST_CASE("CUDA GPT: the fused path's output reaches c_proj as a view, with no copy", "[cuda][gpt][memory]") {
  const int64_t channels = 256, heads = 4, head_dim = channels / heads;
  Generator generator(10);

  SECTION("the (B, H, T, D) output's transpose(1, 2).reshape is a view of its (B, T, H, D) bytes") {
    // q, k and v as CausalSelfAttention makes them: strided head views of one packed tensor.
    const Tensor packed = bfloat16_on_cuda(randn({kBatch, kSequence, 3 * channels}, {}, &generator));
    std::vector<Tensor> qkv = split(packed, channels, 2);
    auto as_heads = [&](const Tensor& projection) {
      return projection.view({kBatch, kSequence, heads, head_dim}).transpose(1, 2);
    };
    for (AttentionBackend backend : {AttentionBackend::Fused, AttentionBackend::Math}) {
      INFO(attention_backend_name(backend));
      AttentionOptions options;
      options.is_causal = true;
      options.backend = backend;
      const Tensor output = scaled_dot_product_attention(as_heads(qkv[0]), as_heads(qkv[1]), as_heads(qkv[2]), options);
      REQUIRE(output.sizes() == Shape{kBatch, heads, kSequence, head_dim});
      const Tensor merged = output.transpose(1, 2).reshape({kBatch, kSequence, channels});
      CHECK(merged.is_contiguous());
      // Fused: the same storage at the same place. Math: the output is (B, H, T, D) dense,
      // so the merge is a copy (what the fused layout saves).
      const bool shared = merged.storage() == output.storage() && merged.raw_data() == output.raw_data();
      CHECK(shared == (backend == AttentionBackend::Fused));
    }
  }

  SECTION("one bfloat16 CausalSelfAttention forward allocates exactly what it keeps, no copy for c_proj") {
    nn::GPTOptions options = small_options(AttentionBackend::Fused);
    auto attention = std::make_shared<nn::CausalSelfAttention>(options, &generator);
    attention->to(kCuda);
    attention->to(DType::BFloat16);
    const Tensor input = bfloat16_on_cuda(randn({kBatch, kSequence, channels}, {}, &generator)).requires_grad_();
    // A first forward creates what lives on (cuBLAS's workspace for the stream).
    (*attention)(input);
    const int64_t before = memory::snapshot(kCuda).requested_bytes;
    const Tensor output = (*attention)(input);
    const int64_t allocated = memory::snapshot(kCuda).requested_bytes - before;
    // Live with the graph (bfloat16, 2 bytes, unless said): c_attn's output (B, T, 3C), the
    // attention output (B, T, H, D), its float32 log-sum-exp (B, H, T) and c_proj's output
    // (B, T, C): 6 BTC + 2 BTC + 4 BHT + 2 BTC bytes. A copy of the attention output for
    // c_proj (which saves its input) would add 2 BTC more.
    const int64_t btc = kBatch * kSequence * channels;
    CHECK(allocated == 10 * btc + 4 * kBatch * heads * kSequence);
    CHECK(output.sizes() == Shape{kBatch, kSequence, channels});
  }
}
