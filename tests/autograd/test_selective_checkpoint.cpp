// tests/autograd/test_selective_checkpoint.cpp — mg::checkpoint with a CheckpointPolicy
// (autograd/checkpoint_policy.h) against the same chain of ops run without a checkpoint:
// equal gradients in float64 to the bit (linear, matmul, fused attention, dropout, nested
// checkpoints, retain_graph, bf16 autocast), the kept ops allocating nothing (so running no
// kernel) in the recompute, the kept bytes between a whole-block checkpoint's and none,
// and the errors when the recompute does not run the forward's kept ops.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/attention.h"
#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/dropout.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/unary.h"
#include "autograd/tensor_checks.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/recorder.h"
#include "memgrad/memory/snapshot.h"

using namespace mg;

namespace {

using mg_test::contains;
using mg_test::error_message;
using mg_test::max_abs_difference;

// The parameters of a small attention block as float64 leaves; one seed, one set of values.
struct Chain {
  Tensor w_qkv, b_qkv, w_out, w_up, b_up;

  explicit Chain(uint64_t seed) {
    Generator generator(seed);
    const TensorOptions parameter{.dtype = DType::Float64, .category = MemoryCategory::Parameter};
    auto leaf = [&](const Shape& sizes, double scale) {
      Tensor value = randn(sizes, parameter, &generator);
      value.mul_(scale);
      return value.requires_grad_();
    };
    w_qkv = leaf({48, 16}, 0.3);
    b_qkv = leaf({48}, 1.0);
    w_out = leaf({16, 16}, 0.3);
    w_up = leaf({16, 32}, 0.3);
    b_up = leaf({32}, 1.0);
  }
  std::vector<Tensor> parameters() const { return {w_qkv, b_qkv, w_out, w_up, b_up}; }

  // (B, T, 16) -> (B, T, 32): linear, attention over 2 heads (fused or math), linear,
  // tanh, dropout, matmul, GELU: every kind a policy keeps with cheap ops between them.
  Tensor forward(const Tensor& x, AttentionBackend backend, double p) const {
    const int64_t batch = x.size(0), steps = x.size(1);
    Tensor qkv = linear(x, w_qkv, b_qkv);  // (B, T, 48)
    auto heads = [&](int64_t index) {
      return transpose(reshape(narrow(qkv, 2, 16 * index, 16), {batch, steps, 2, 8}), 1, 2);  // (B, 2, T, 8)
    };
    Tensor attended = scaled_dot_product_attention(
        heads(0), heads(1), heads(2), {.is_causal = true, .dropout_p = p, .backend = backend});
    Tensor merged = reshape(transpose(attended, 1, 2), {batch, steps, 16});
    Tensor hidden = tanh(add(x, linear(merged, w_out)));
    if (p > 0.0) hidden = dropout(hidden, p);
    return gelu(add(matmul(hidden, w_up), b_up));
  }
};

Tensor input_leaf(uint64_t seed) {
  Generator generator(seed);
  return randn({2, 6, 16}, {.dtype = DType::Float64}, &generator).requires_grad_();
}

// The loss's output and every gradient of one run (seeded the same way each time).
struct Run {
  Tensor output;
  std::vector<Tensor> grads;  // the input's, then the parameters'
};

// None: the chain directly; an engaged optional: under checkpoint with that policy (an empty
// one is a whole-block checkpoint).
Run run_chain(const std::optional<CheckpointPolicy>& policy, AttentionBackend backend, double p) {
  Chain chain(3);
  Tensor x = input_leaf(4);
  manual_seed(5);
  auto block = [&](const Tensor& input) { return chain.forward(input, backend, p); };
  Tensor output = policy ? checkpoint(block, x, *policy) : block(x);
  sum(mul(output, output)).backward();
  Run run{output.detach(), {x.grad()}};
  for (const Tensor& parameter : chain.parameters()) run.grads.push_back(parameter.grad());
  return run;
}

void check_identical(const Run& plain, const Run& checked) {
  CHECK(max_abs_difference(plain.output, checked.output) == 0.0);
  REQUIRE(plain.grads.size() == checked.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    INFO("gradient " << i << " (0: the input, then w_qkv, b_qkv, w_out, w_up, b_up)");
    REQUIRE(checked.grads[i].defined());
    CHECK(max_abs_difference(plain.grads[i], checked.grads[i]) == 0.0);
  }
}

}  // namespace

TEST_CASE("selective checkpointing gives the unchecked gradients to the bit in float64, with dropout",
          "[selective_checkpoint]") {
  const std::vector<CheckpointPolicy> policies{
      CheckpointPolicy::matmul_and_attention(), CheckpointPolicy{OpKind::Matmul}, CheckpointPolicy{OpKind::Attention},
      CheckpointPolicy{OpKind::Convolution} /* keeps nothing here */};
  for (AttentionBackend backend : {AttentionBackend::Math, AttentionBackend::Fused}) {
    for (double p : {0.0, 0.25}) {
      const Run plain = run_chain(std::nullopt, backend, p);
      for (const CheckpointPolicy& policy : policies) {
        INFO(attention_backend_name(backend) << " attention, dropout " << p << ", keeping " << policy.describe());
        check_identical(plain, run_chain(policy, backend, p));
      }
    }
  }
}

TEST_CASE("a selective checkpoint's recompute allocates no output for a kept op: its kernel does not run",
          "[selective_checkpoint]") {
  // The bytes the backward allocated, by the op the Recorder names them after: a recomputed
  // op's output takes the op's name ("Linear", "Matmul", the fused attention's scope).
  auto backward_bytes = [](const std::optional<CheckpointPolicy>& policy) {
    memory::Recorder recorder({.device = Device::cpu()});
    recorder.start();
    run_chain(policy, AttentionBackend::Fused, 0.0);
    recorder.stop();
    std::map<std::string, int64_t> bytes;
    for (const memory::MemoryEvent& event : recorder.timeline().events) {
      if (event.kind == memory::EventKind::Allocate && event.phase == memory::Phase::Backward) {
        bytes[event.op] += event.bytes;
      }
    }
    return bytes;
  };
  const char* kAttention = "scaled_dot_product_attention[fused]";
  std::map<std::string, int64_t> whole = backward_bytes(CheckpointPolicy{});
  std::map<std::string, int64_t> selective = backward_bytes(CheckpointPolicy::matmul_and_attention());
  std::map<std::string, int64_t> matmul_only = backward_bytes(CheckpointPolicy{OpKind::Matmul});
  // The whole-block recompute makes every output again (float64): the two linears' (2, 6, 48)
  // and (2, 6, 16), the matmul's (2, 6, 32), attention's (2, 6, 16) and log-sum-exp (2, 2, 6).
  // NOTE: the backward's seed (one float64) takes the label of the first op recorded after
  // it, here the first linear, under every policy.
  const int64_t seed = 8;
  CHECK(whole["Linear"] == seed + (2 * 6 * 48 + 2 * 6 * 16) * 8);
  CHECK(whole["Matmul"] == 2 * 6 * 32 * 8);
  CHECK(whole[kAttention] == (2 * 6 * 16 + 2 * 2 * 6) * 8);
  CHECK(selective["Linear"] == seed);
  CHECK(selective["Matmul"] == 0);
  CHECK(selective[kAttention] == 0);
  CHECK(matmul_only["Linear"] == seed);
  CHECK(matmul_only["Matmul"] == 0);
  CHECK(matmul_only[kAttention] == whole[kAttention]);
  // The cheap ops run again under every policy.
  CHECK(selective["Tanh"] == whole["Tanh"]);
  CHECK(selective["Gelu"] == whole["Gelu"]);
  CHECK(selective["Gelu"] == 2 * 6 * 32 * 8);
}

TEST_CASE("a selective checkpoint keeps its input and the kept ops' outputs as ACTIVATION, no more",
          "[selective_checkpoint]") {
  // ACTIVATION held between the forward and the backward, by a run of the chain.
  auto held = [](const std::optional<CheckpointPolicy>& policy) {
    Chain chain(3);
    Tensor x = input_leaf(4);
    auto block = [&](const Tensor& input) { return chain.forward(input, AttentionBackend::Fused, 0.0); };
    const int64_t before = memory::snapshot().category(MemoryCategory::Activation).current;
    Tensor output = policy ? checkpoint(block, x, *policy) : block(x);
    const int64_t bytes = memory::snapshot().category(MemoryCategory::Activation).current - before;
    sum(output).backward();
    return bytes;
  };
  const int64_t none = held(std::nullopt), selective = held(CheckpointPolicy::matmul_and_attention());
  const int64_t whole = held(CheckpointPolicy{});
  INFO("ACTIVATION held through the forward: " << none << " bytes unchecked, " << selective << " selective, "
       << whole << " whole");
  // Whole keeps x (2*6*16 doubles); selective also the three products' outputs and the
  // attention's output and log-sum-exp. (This chain saves as much unchecked: there the
  // ops after each product save their inputs, the products' outputs. A block whose cheap
  // ops save more, such as layer norm's statistics or the math attention's weights, keeps
  // less selectively: tests/nn/test_selective_checkpoint_models.cpp.)
  CHECK(whole == 2 * 6 * 16 * 8);
  const int64_t kept = (2 * 6 * 48 + 2 * 6 * 16 + 2 * 6 * 32 + 2 * 6 * 16 + 2 * 2 * 6) * 8;
  CHECK(selective == whole + kept);
  CHECK(selective <= none);
}

TEST_CASE("selective checkpoints nest and survive retain_graph, with the unchecked gradients",
          "[selective_checkpoint]") {
  const Run plain = run_chain(std::nullopt, AttentionBackend::Fused, 0.25);
  for (const CheckpointPolicy& inner : {CheckpointPolicy{}, CheckpointPolicy{OpKind::Matmul},
                                        CheckpointPolicy::matmul_and_attention()}) {
    INFO("outer keeps matmul and attention, inner keeps " << inner.describe());
    Chain chain(3);
    Tensor x = input_leaf(4);
    manual_seed(5);
    Tensor output = checkpoint(
        [&](const Tensor& input) {
          Tensor half = checkpoint([&](const Tensor& y) { return chain.forward(y, AttentionBackend::Fused, 0.25); },
                                   input, inner);
          return half;
        },
        x, CheckpointPolicy::matmul_and_attention());
    sum(mul(output, output)).backward();
    Run nested{output.detach(), {x.grad()}};
    for (const Tensor& parameter : chain.parameters()) nested.grads.push_back(parameter.grad());
    check_identical(plain, nested);
  }

  Chain chain(3);
  Tensor x = input_leaf(4);
  manual_seed(5);
  Tensor output = checkpoint([&](const Tensor& input) { return chain.forward(input, AttentionBackend::Fused, 0.25); },
                             x, CheckpointPolicy::matmul_and_attention());
  Tensor loss = sum(output);  // its node saves nothing: a third backward reaches the checkpoint's
  autograd::backward({loss}, {}, /*retain_graph=*/true);
  Tensor first = x.grad().clone();
  x.grad().zero_();
  loss.backward();  // the kept outputs were kept for it
  CHECK(max_abs_difference(first, x.grad()) == 0.0);
  std::string message = error_message([&] { loss.backward(); });
  CHECK(contains(message, "SelectiveCheckpointBackward"));
  CHECK(contains(message, "second time"));
}

TEST_CASE("under bf16 autocast a selective checkpoint keeps the bf16 products and matches the unchecked run",
          "[selective_checkpoint]") {
  auto run = [](bool checkpointed, DType* kept_dtype) {
    Generator generator(8);
    Tensor w = randn({16, 16}, {.category = MemoryCategory::Parameter}, &generator).requires_grad_();
    Tensor x = randn({4, 16}, {}, &generator).requires_grad_();
    auto block = [&](const Tensor& input) {
      Tensor product = linear(input, w);
      if (kept_dtype != nullptr) *kept_dtype = product.dtype();
      return sum(relu(product), {1});
    };
    Tensor y;
    {
      amp::AutocastGuard autocast(DType::BFloat16, DeviceType::CPU);
      y = checkpointed ? checkpoint(block, x, CheckpointPolicy{OpKind::Matmul}) : block(x);
    }
    sum(y).backward();
    return std::make_pair(x.grad(), w.grad());
  };
  DType kept = DType::Float32;
  auto [plain_x, plain_w] = run(false, nullptr);
  auto [checked_x, checked_w] = run(true, &kept);
  CHECK(kept == DType::BFloat16);  // the recompute took the bf16 output the forward kept
  CHECK(max_abs_difference(plain_x, checked_x) == 0.0);
  CHECK(max_abs_difference(plain_w, checked_w) == 0.0);
}

TEST_CASE("a recompute that does not run the forward's kept ops is an error naming the op", "[selective_checkpoint]") {
  Generator generator(9);
  Tensor w = randn({8, 8}, {.category = MemoryCategory::Parameter}, &generator).requires_grad_();
  Tensor x = randn({3, 8}, {}, &generator).requires_grad_();
  int calls = 0;
  // Forward: two products; recompute: `recomputed` decides.
  auto failure = [&](const std::function<Tensor(const Tensor&)>& recomputed) {
    calls = 0;
    Tensor y = checkpoint(
        [&](const Tensor& input) {
          if (++calls > 1) return recomputed(input);
          return relu(matmul(relu(linear(input, w)), w));
        },
        x, CheckpointPolicy{OpKind::Matmul});
    return error_message([&] { sum(y).backward(); });
  };
  std::string more = failure([&](const Tensor& input) { return matmul(relu(matmul(relu(linear(input, w)), w)), w); });
  INFO(more);
  CHECK(contains(more, "runs more kept ops than the forward did"));
  CHECK(contains(more, "#3 is matmul"));
  CHECK(contains(more, "keeping matmul"));
  std::string fewer = failure([&](const Tensor& input) { return relu(relu(linear(input, w))); });
  CHECK(contains(fewer, "ran only 1 of the 2 kept ops"));
  CHECK(contains(fewer, "#2, matmul giving [3, 8] float32"));
  std::string other = failure([&](const Tensor& input) { return relu(linear(relu(linear(input, w)), w)); });
  CHECK(contains(other, "differs from the forward at kept op #2 of 2"));
  CHECK(contains(other, "the forward ran matmul giving [3, 8] float32 there, the recompute runs linear"));
  std::string shape = failure([&](const Tensor& input) {
    return relu(matmul(narrow(relu(linear(input, w)), 0, 0, 2), w));
  });
  CHECK(contains(shape, "the recompute runs matmul giving [2, 8] float32"));
}
