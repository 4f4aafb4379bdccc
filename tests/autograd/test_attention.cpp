// tests/autograd/test_attention.cpp — scaled_dot_product_attention on the CPU: gradients of
// both paths against finite differences in float64, the fused path against the math path
// (forward, the three gradients, dropout drawn from one seed), strided views of a packed
// projection, 3-D inputs, 16-bit dtypes and autocast, the choice of path, and the errors;
// last, the GPT's packed q, k, v, whose gradients the fused backward writes as one packed
// gradient (values, the bytes the copies no longer take, gradcheck).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/attention.h"
#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/node.h"
#include "autograd/op_test_support.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "autograd/tensor_checks.h"
#include "memgrad/autograd/split.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/simulated_target.h"

using namespace mg;

namespace {

using mg_test::contains;
using mg_test::error_message;
using mg_test::max_abs_difference;

Tensor normal_values(const Shape& sizes, uint64_t seed, DType dtype = DType::Float64) {
  Generator generator(seed);
  return randn(sizes, {.dtype = dtype}, &generator);
}

Tensor normal_leaf(const Shape& sizes, uint64_t seed) { return normal_values(sizes, seed).requires_grad_(); }

AttentionOptions with_backend(AttentionBackend backend, AttentionOptions options = {}) {
  options.backend = backend;
  return options;
}

void check_gradcheck(const AttentionOptions& options, const std::vector<Tensor>& inputs) {
  GradcheckResult result = gradcheck(
      [&](const std::vector<Tensor>& in) {
        AttentionOptions call = options;
        if (in.size() > 3) call.attn_mask = in[3];
        return scaled_dot_product_attention(in[0], in[1], in[2], call);
      },
      inputs);
  INFO(result.message);
  CHECK(result.passed);
}

// The output and the three gradients of one call on fresh leaves holding `q`, `k`, `v`'s
// values, with `grad_output` flowing back.
struct Run {
  Tensor output, grad_q, grad_k, grad_v;
};
Run run_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& grad_output,
                  const AttentionOptions& options) {
  Tensor q_leaf = contiguous_copy(q).requires_grad_(), k_leaf = contiguous_copy(k).requires_grad_();
  Tensor v_leaf = contiguous_copy(v).requires_grad_();
  Tensor output = scaled_dot_product_attention(q_leaf, k_leaf, v_leaf, options);
  output.backward(grad_output);
  return {output.detach(), q_leaf.grad(), k_leaf.grad(), v_leaf.grad()};
}

void check_runs_agree(const Run& a, const Run& b, double tolerance) {
  CHECK(max_abs_difference(a.output, b.output) < tolerance);
  CHECK(max_abs_difference(a.grad_q, b.grad_q) < tolerance);
  CHECK(max_abs_difference(a.grad_k, b.grad_k) < tolerance);
  CHECK(max_abs_difference(a.grad_v, b.grad_v) < tolerance);
}

}  // namespace

TEST_CASE("the math path's gradients match finite differences", "[attention]") {
  Tensor q = normal_leaf({2, 2, 3, 4}, 1), k = normal_leaf({2, 2, 5, 4}, 2), v = normal_leaf({2, 2, 5, 3}, 3);
  const AttentionOptions math = with_backend(AttentionBackend::Math);
  SECTION("plain") { check_gradcheck(math, {q, k, v}); }
  SECTION("causal") {
    AttentionOptions options = math;
    options.is_causal = true;
    check_gradcheck(options, {q, k, v});
  }
  SECTION("a scale") {
    AttentionOptions options = math;
    options.scale = 0.7;
    check_gradcheck(options, {q, k, v});
  }
  SECTION("a float mask, itself differentiable, broadcast over the batch") {
    check_gradcheck(math, {q, k, v, normal_leaf({2, 1, 3, 5}, 4)});
  }
  SECTION("a bool mask") {
    AttentionOptions options = math;
    options.attn_mask = from_vector<bool>({true, false, true, true, false,  //
                                           false, true, true, false, true,  //
                                           true, true, false, false, false},
                                          {3, 5});
    check_gradcheck(options, {q, k, v});
  }
}

TEST_CASE("the fused path's gradients match finite differences", "[attention]") {
  const bool causal = GENERATE(false, true);
  const auto [queries, keys] = GENERATE(std::pair{4, 4}, std::pair{3, 5}, std::pair{5, 3});
  INFO("causal " << causal << ", Tq " << queries << ", Tk " << keys);
  AttentionOptions options = with_backend(AttentionBackend::Fused);
  options.is_causal = causal;
  check_gradcheck(options, {normal_leaf({2, 2, queries, 4}, 5), normal_leaf({2, 2, keys, 4}, 6),
                            normal_leaf({2, 2, keys, 4}, 7)});
}

TEST_CASE("with dropout, both paths' gradients match finite differences for one mask", "[attention]") {
  const AttentionBackend backend = GENERATE(AttentionBackend::Math, AttentionBackend::Fused);
  INFO(attention_backend_name(backend));
  GradcheckResult result = gradcheck(
      [&](const std::vector<Tensor>& in) {
        Generator generator(8);  // the same mask at every evaluation
        AttentionOptions options = with_backend(backend);
        options.is_causal = true;
        options.dropout_p = 0.4;
        options.generator = &generator;
        return scaled_dot_product_attention(in[0], in[1], in[2], options);
      },
      {normal_leaf({1, 2, 5, 4}, 14), normal_leaf({1, 2, 6, 4}, 15), normal_leaf({1, 2, 6, 4}, 16)});
  INFO(result.message);
  CHECK(result.passed);
}

TEST_CASE("fused and math paths agree in float64, dropout included", "[attention]") {
  const bool causal = GENERATE(false, true);
  const double dropout_p = GENERATE(0.0, 0.3);
  // Tq and Tk cross the CPU kernel's tiles (32 queries, 64 keys) and differ from each other.
  const auto [queries, keys] = GENERATE(std::pair{37, 70}, std::pair{70, 37});
  INFO("causal " << causal << ", dropout " << dropout_p << ", Tq " << queries << ", Tk " << keys);
  const Tensor q = normal_values({2, 3, queries, 16}, 10), k = normal_values({2, 3, keys, 16}, 11);
  const Tensor v = normal_values({2, 3, keys, 16}, 12), grad_output = normal_values({2, 3, queries, 16}, 13);

  auto run_with = [&](AttentionBackend backend, Generator& generator) {
    AttentionOptions options = with_backend(backend);
    options.is_causal = causal;
    options.dropout_p = dropout_p;
    options.generator = &generator;
    return run_attention(q, k, v, grad_output, options);
  };
  Generator math_generator(99), fused_generator(99);
  const Run math = run_with(AttentionBackend::Math, math_generator);
  const Run fused = run_with(AttentionBackend::Fused, fused_generator);
  check_runs_agree(math, fused, 1e-10);
  // Both reserve one Philox block per weight, B * H * Tq * Tk, or none without dropout.
  const uint64_t reserved = dropout_p > 0.0 ? 2 * 3 * queries * keys : 0;
  CHECK(math_generator.state().offset == reserved);
  CHECK(fused_generator.state().offset == reserved);

  if (dropout_p > 0.0) {  // the mask really drops: another seed gives another result
    Generator other(100);
    CHECK(max_abs_difference(run_with(AttentionBackend::Fused, other).output, fused.output) > 1e-3);
  }
}

TEST_CASE("q, k, v as strided views of one packed projection give the contiguous result", "[attention]") {
  const AttentionBackend backend = GENERATE(AttentionBackend::Math, AttentionBackend::Fused);
  INFO(attention_backend_name(backend));
  const int64_t batch = 2, seq = 9, heads = 3, head_dim = 8;
  Tensor packed = normal_leaf({batch, seq, 3, heads, head_dim}, 20);  // one (B, T, 3 * H * D) projection
  // (B, T, H, D) slices seen as (B, H, T, D): the last dim keeps unit stride.
  auto head_view = [&](int64_t which) { return transpose(select(packed, 2, which), 1, 2); };
  const Tensor q = head_view(0), k = head_view(1), v = head_view(2);
  REQUIRE(q.strides().back() == 1);
  REQUIRE(!q.is_contiguous());
  const Tensor grad_output = normal_values({batch, heads, seq, head_dim}, 21);
  AttentionOptions options = with_backend(backend);
  options.is_causal = true;
  if (backend == AttentionBackend::Fused) CHECK(attention_backend_for(q, k, v, options) == AttentionBackend::Fused);

  Tensor output = scaled_dot_product_attention(q, k, v, options);
  output.backward(grad_output);
  const Run contiguous = run_attention(q.detach(), k.detach(), v.detach(), grad_output, options);
  CHECK(max_abs_difference(output, contiguous.output) < 1e-12);
  // The packed gradient holds the three in its slots.
  CHECK(max_abs_difference(transpose(select(packed.grad(), 2, 0), 1, 2), contiguous.grad_q) < 1e-12);
  CHECK(max_abs_difference(transpose(select(packed.grad(), 2, 1), 1, 2), contiguous.grad_k) < 1e-12);
  CHECK(max_abs_difference(transpose(select(packed.grad(), 2, 2), 1, 2), contiguous.grad_v) < 1e-12);
}

TEST_CASE("the fused output is (B, Tq, H, D) in memory, so merging the heads is a view", "[attention]") {
  const Tensor q = normal_values({2, 3, 5, 4}, 30), k = normal_values({2, 3, 6, 4}, 31);
  const Tensor v = normal_values({2, 3, 6, 4}, 32);
  Tensor output = scaled_dot_product_attention(q, k, v, with_backend(AttentionBackend::Fused));
  CHECK(output.sizes() == Shape{2, 3, 5, 4});
  CHECK(output.strides() == Shape{5 * 3 * 4, 4, 3 * 4, 1});
  Tensor merged = reshape(transpose(output, 1, 2), {2, 5, 12});
  CHECK(merged.storage() == output.storage());
  CHECK(max_abs_difference(output, scaled_dot_product_attention(q, k, v, with_backend(AttentionBackend::Math))) <
        1e-12);
}

TEST_CASE("3-D inputs (N, T, D) take either path and agree", "[attention]") {
  const Tensor q = normal_values({4, 6, 5}, 40), k = normal_values({4, 7, 5}, 41), v = normal_values({4, 7, 5}, 42);
  const Tensor grad_output = normal_values({4, 6, 5}, 43);
  AttentionOptions options;
  options.is_causal = true;
  const Run math = run_attention(q, k, v, grad_output, with_backend(AttentionBackend::Math, options));
  const Run fused = run_attention(q, k, v, grad_output, with_backend(AttentionBackend::Fused, options));
  CHECK(fused.output.sizes() == Shape{4, 6, 5});
  CHECK(fused.output.is_contiguous());
  check_runs_agree(math, fused, 1e-12);
  check_gradcheck(with_backend(AttentionBackend::Fused, options),
                  {normal_leaf({2, 3, 4}, 44), normal_leaf({2, 5, 4}, 45), normal_leaf({2, 5, 4}, 46)});
}

TEST_CASE("attention on hand-computed numbers: one query, two keys", "[attention]") {
  // scores = [1 * 2, 1 * 0] * scale 1 = [2, 0]; weights = softmax = [e^2, 1] / (e^2 + 1).
  const Tensor q = from_vector<double>({1.0}, {1, 1, 1, 1});
  const Tensor k = from_vector<double>({2.0, 0.0}, {1, 1, 2, 1});
  const Tensor v = from_vector<double>({10.0, -4.0}, {1, 1, 2, 1});
  const double weight = std::exp(2.0) / (std::exp(2.0) + 1.0);
  const double expected = weight * 10.0 + (1.0 - weight) * -4.0;
  for (AttentionBackend backend : {AttentionBackend::Math, AttentionBackend::Fused}) {
    CHECK(scaled_dot_product_attention(q, k, v, with_backend(backend)).item() == Approx(expected).epsilon(1e-14));
  }
  AttentionOptions causal = with_backend(AttentionBackend::Fused);
  causal.is_causal = true;  // query 0 sees key 0 only
  CHECK(scaled_dot_product_attention(q, k, v, causal).item() == Approx(10.0).epsilon(1e-14));
}

TEST_CASE("16-bit inputs: the fused CPU kernel matches the math path", "[attention]") {
  const DType dtype = GENERATE(DType::Float32, DType::Float16, DType::BFloat16);
  INFO(dtype);
  const double tolerance = dtype == DType::Float32 ? 1e-5 : dtype == DType::Float16 ? 1e-2 : 5e-2;
  const Tensor q = normal_values({2, 2, 40, 16}, 50, dtype), k = normal_values({2, 2, 40, 16}, 51, dtype);
  const Tensor v = normal_values({2, 2, 40, 16}, 52, dtype), grad_output = normal_values({2, 2, 40, 16}, 53, dtype);
  AttentionOptions options;
  options.is_causal = true;
  // The reference: the math path in float64 on the same (rounded) values.
  const Run reference = run_attention(q.to(DType::Float64), k.to(DType::Float64), v.to(DType::Float64),
                                      grad_output.to(DType::Float64), with_backend(AttentionBackend::Math, options));
  const Run fused = run_attention(q, k, v, grad_output, with_backend(AttentionBackend::Fused, options));
  CHECK(fused.output.dtype() == dtype);
  CHECK(fused.grad_q.dtype() == dtype);
  check_runs_agree(reference, fused, tolerance);
}

TEST_CASE("under autocast attention runs in the autocast dtype, on either path", "[attention][amp]") {
  const AttentionBackend backend = GENERATE(AttentionBackend::Math, AttentionBackend::Fused);
  INFO(attention_backend_name(backend));
  Tensor q = normal_values({1, 2, 8, 8}, 60, DType::Float32).requires_grad_();
  const Tensor k = normal_values({1, 2, 8, 8}, 61, DType::Float32), v = normal_values({1, 2, 8, 8}, 62, DType::Float32);
  Tensor output;
  {
    amp::AutocastGuard autocast(DType::BFloat16, DeviceType::CPU);
    output = scaled_dot_product_attention(q, k, v, with_backend(backend));
  }
  CHECK(output.dtype() == DType::BFloat16);
  output.sum().backward();
  CHECK(q.grad().dtype() == DType::Float32);  // back through the cast to the float32 leaf
  const Tensor reference = scaled_dot_product_attention(q.detach(), k, v, with_backend(AttentionBackend::Math));
  CHECK(max_abs_difference(output, reference) < 5e-2);
}

TEST_CASE("the fused node is one node that saves five tensors and names itself", "[attention]") {
  Tensor q = normal_leaf({1, 2, 4, 8}, 70), k = normal_leaf({1, 2, 4, 8}, 71), v = normal_leaf({1, 2, 4, 8}, 72);
  Tensor fused = scaled_dot_product_attention(q, k, v, with_backend(AttentionBackend::Fused));
  REQUIRE(fused.grad_fn() != nullptr);
  CHECK(std::string(fused.grad_fn()->name()) == "ScaledDotProductFusedAttentionBackward");
  CHECK(fused.grad_fn()->next_edges().size() == 3);
  Tensor math = scaled_dot_product_attention(q, k, v, with_backend(AttentionBackend::Math));
  CHECK(std::string(math.grad_fn()->name()) == "MatmulBackward");  // the math path's last op
}

TEST_CASE("Auto takes the math path on the CPU and the fused one where CUDA's rule holds", "[attention]") {
  const Tensor q = normal_values({1, 2, 4, 8}, 80, DType::Float32);
  CHECK(attention_backend_for(q, q, q) == AttentionBackend::Math);
  CHECK(attention_backend_for(q, q, q, with_backend(AttentionBackend::Fused)) == AttentionBackend::Fused);

  // The simulated device chooses as the GPU it stands in for (memory predictions).
  const Device simulated = Device::simulated(6);
  SimulatedTarget target(Device::cuda(), simulated, size_t{1} << 30);
  auto simulated_tensor = [&](DType dtype, int64_t head_dim) {
    return empty({2, 4, 16, head_dim}, {.dtype = dtype, .device = simulated});
  };
  {
    const Tensor half = simulated_tensor(DType::Float16, 64);
    CHECK(attention_backend_for(half, half, half) == AttentionBackend::Fused);
    AttentionOptions masked;
    masked.attn_mask = empty({16, 16}, {.dtype = DType::Bool, .device = simulated});
    CHECK(attention_backend_for(half, half, half, masked) == AttentionBackend::Math);
    // float32 runs on the FP32 kernels with any head_dim up to 128, 16-bit types on tensor
    // cores with multiples of 8; float64 and wider heads take the math path.
    const Tensor float32 = simulated_tensor(DType::Float32, 64);
    CHECK(attention_backend_for(float32, float32, float32) == AttentionBackend::Fused);
    {
      amp::AutocastGuard autocast(DType::BFloat16, DeviceType::Simulated);  // casts float32 to bfloat16
      CHECK(attention_backend_for(float32, float32, float32) == AttentionBackend::Fused);
    }
    const Tensor odd_float32 = simulated_tensor(DType::Float32, 13);
    CHECK(attention_backend_for(odd_float32, odd_float32, odd_float32) == AttentionBackend::Fused);
    const Tensor wide_float32 = simulated_tensor(DType::Float32, 136);
    CHECK(attention_backend_for(wide_float32, wide_float32, wide_float32) == AttentionBackend::Math);
    const Tensor float64 = simulated_tensor(DType::Float64, 64);
    const AttentionOptions fused = with_backend(AttentionBackend::Fused);
    CHECK(error_message([&] { attention_backend_for(float64, float64, float64, fused); }) ==
          "scaled_dot_product_attention: the fused path was asked for but does not apply: fused attention on CUDA "
          "needs float32 with head_dim <= 128, or float16 or bfloat16 with head_dim <= 128 and a multiple of 8, got "
          "float64 head_dim 64. Hint: use AttentionBackend::Auto (or Math) to fall back to the math path.");
    const Tensor odd = simulated_tensor(DType::Float16, 12);
    CHECK(attention_backend_for(odd, odd, odd) == AttentionBackend::Math);
  }
}

TEST_CASE("attention's errors name the rule and the shapes", "[attention]") {
  const Tensor q = normal_values({2, 3, 4, 8}, 90), k = normal_values({2, 3, 5, 8}, 91);
  const Tensor v = normal_values({2, 3, 5, 6}, 92);
  auto message = [](const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options = {}) {
    return error_message([&] { scaled_dot_product_attention(q, k, v, options); });
  };
  CHECK(contains(message(q, normal_values({2, 3, 5, 7}, 1), v), "q and k must have the same head_dim"));
  CHECK(contains(message(q, normal_values({2, 3, 5, 7}, 1), v), "[2, 3, 5, 7]"));
  CHECK(contains(message(q, k, normal_values({2, 3, 6, 6}, 1)), "k and v must have the same number of keys"));
  CHECK(contains(message(q, normal_values({2, 2, 5, 8}, 1), v), "the same leading (batch, heads) dims"));
  CHECK(contains(message(q, normal_values({3, 5, 8}, 1), v), "one rank of at least 2"));
  CHECK(contains(message(q, k.to(DType::Float32), v), "q, k and v must have one dtype"));
  CHECK(contains(message(q.to(DType::Int64), k, v), "expected a floating-point tensor"));
  CHECK(contains(message(q, k, empty({2, 3, 5, 6}, {.dtype = DType::Float64, .device = Device::simulated(6)})),
                 "same device"));

  AttentionOptions options;
  options.dropout_p = 1.0;
  CHECK(contains(message(q, k, v, options), "dropout_p must be in [0, 1), got 1"));
  options.dropout_p = -0.1;
  CHECK(contains(message(q, k, v, options), "dropout_p must be in [0, 1)"));

  AttentionOptions causal_and_mask;
  causal_and_mask.is_causal = true;
  causal_and_mask.attn_mask = ones({4, 5}, {.dtype = DType::Bool});
  CHECK(contains(message(q, k, v, causal_and_mask), "attn_mask and is_causal cannot both be set"));

  AttentionOptions wrong_mask;
  wrong_mask.attn_mask = ones({3, 4, 4}, {.dtype = DType::Bool});
  const std::string not_broadcast = message(q, k, v, wrong_mask);
  CHECK(contains(not_broadcast, "attn_mask of shape [3, 4, 4] does not broadcast"));
  CHECK(contains(not_broadcast, "[2, 3, 4, 5]"));
  wrong_mask.attn_mask = ones({4, 5}, {.dtype = DType::Float32});
  CHECK(contains(message(q, k, v, wrong_mask), "attn_mask must be bool or have the dtype of q"));

  AttentionOptions fused_with_mask = with_backend(AttentionBackend::Fused);
  fused_with_mask.attn_mask = ones({4, 5}, {.dtype = DType::Bool});
  CHECK(contains(message(q, k, normal_values({2, 3, 5, 8}, 1), fused_with_mask), "fused attention takes no attn_mask"));
  CHECK(contains(message(q, k, v, with_backend(AttentionBackend::Fused)),
                 "fused attention needs v's head_dim equal to q's, got 6 and 8"));
  const Tensor five_d = normal_values({1, 2, 3, 4, 8}, 2);
  CHECK(contains(message(five_d, five_d, five_d, with_backend(AttentionBackend::Fused)),
                 "fused attention needs 3-D or 4-D tensors"));
  const Tensor strided = transpose(normal_values({2, 3, 8, 4}, 3), 2, 3);  // (2, 3, 4, 8), last stride 4
  CHECK(contains(message(strided, strided, strided, with_backend(AttentionBackend::Fused)),
                 "fused attention needs unit stride in the last dim"));
  // The math path takes what the fused one refuses.
  CHECK(scaled_dot_product_attention(strided, strided, strided).sizes() == Shape{2, 3, 4, 8});
  CHECK(scaled_dot_product_attention(five_d, five_d, five_d).sizes() == Shape{1, 2, 3, 4, 8});
}

// ---- the packed projection's gradient, born whole ----

namespace {

// q, k and v as the GPT makes them (nn/attention.cpp): split(qkv, C, 2), each (B, T, C)
// piece viewed (B, T, H, D) and transposed to (B, H, T, D), strided views of `packed`.
// `order` names the piece each of q, k and v takes.
std::vector<Tensor> gpt_heads(const Tensor& packed, int64_t heads, std::array<int, 3> order = {0, 1, 2}) {
  const int64_t batch = packed.sizes()[0], seq = packed.sizes()[1], channels = packed.sizes()[2] / 3;
  const std::vector<Tensor> pieces = split(packed, channels, 2);
  std::vector<Tensor> qkv;
  for (int which : order) qkv.push_back(pieces[which].view({batch, seq, heads, channels / heads}).transpose(1, 2));
  return qkv;
}

// Bytes the CPU allocator has handed out so far, freed or not (rounded to its 512 B).
int64_t cpu_bytes_handed_out() { return allocator_for(Device::cpu()).stats().allocated_bytes.allocated; }

}  // namespace

TEST_CASE("the fused backward writes a packed projection's gradient whole, with no copies", "[attention]") {
  const std::array<int, 3> order = GENERATE(std::array<int, 3>{0, 1, 2}, std::array<int, 3>{2, 0, 1});
  INFO("q, k, v take pieces " << order[0] << ", " << order[1] << ", " << order[2]);
  const int64_t batch = 2, seq = 8, heads = 2, head_dim = 8, channels = heads * head_dim;
  const Tensor projection = normal_values({batch, seq, 3 * channels}, 100);
  const Tensor grad_output = normal_values({batch, heads, seq, head_dim}, 101);
  AttentionOptions options = with_backend(AttentionBackend::Fused);
  options.is_causal = true;

  // The packed leaf's gradient and the bytes its backward handed out, with q, k and v the
  // packed views themselves or contiguous copies of them (the separate-allocation case).
  auto run = [&](bool copied) {
    Tensor packed = contiguous_copy(projection).requires_grad_();
    std::vector<Tensor> qkv = gpt_heads(packed, heads, order);
    if (copied) {
      for (Tensor& x : qkv) x = contiguous(x);
    }
    Tensor output = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], options);
    const int64_t before = cpu_bytes_handed_out();
    output.backward(grad_output);
    return std::pair{packed.grad(), cpu_bytes_handed_out() - before};
  };
  const auto [packed_grad, packed_bytes] = run(false);
  const auto [copied_grad, copied_bytes] = run(true);
  CHECK(max_abs_difference(packed_grad, copied_grad) < 1e-12);

  // One (B, T, 3C) float64 gradient is 2 * 8 * 48 * 8 = 6144 B, a (B, H, T, D) one 2048 B.
  // Packed: the fused backward's one buffer, whose views transpose and view hand back and
  // split returns whole, which the leaf then keeps: 6144 B. Separate: three (B, H, T, D)
  // gradients (6144), the copy each non-contiguous (B, T, H, D) transpose of them needs to
  // become (B, T, C) (6144), and split's (B, T, 3C) gradient (6144): 18432 B. The packing
  // saves two packed gradients' bytes, and the four passes that wrote and read them.
  const int64_t packed_gradient_bytes = batch * seq * 3 * channels * 8;
  CHECK(packed_bytes == packed_gradient_bytes);
  CHECK(copied_bytes == 3 * packed_gradient_bytes);
  CHECK(copied_bytes - packed_bytes == 2 * packed_gradient_bytes);
}

TEST_CASE("q, k, v that do not tile one region get separate gradients, still right", "[attention]") {
  const int64_t batch = 2, seq = 5, heads = 2, head_dim = 4, channels = heads * head_dim;
  const Tensor projection = normal_values({batch, seq, 4 * channels}, 102);
  const Tensor grad_output = normal_values({batch, heads, seq, head_dim}, 103);
  const AttentionOptions options = with_backend(AttentionBackend::Fused);
  // Pieces 0, 1 and 3 of four: one storage, but a gap where piece 2 sits.
  Tensor packed = contiguous_copy(projection).requires_grad_();
  const std::vector<Tensor> pieces = split(packed, channels, 2);
  auto head = [&](int which) { return pieces[which].view({batch, seq, heads, head_dim}).transpose(1, 2); };
  scaled_dot_product_attention(head(0), head(1), head(3), options).backward(grad_output);
  const Run contiguous = run_attention(head(0).detach(), head(1).detach(), head(3).detach(), grad_output, options);
  auto grad_of = [&](int which) { return packed.grad().narrow(2, which * channels, channels); };
  CHECK(max_abs_difference(grad_of(0).view({batch, seq, heads, head_dim}).transpose(1, 2), contiguous.grad_q) < 1e-12);
  CHECK(max_abs_difference(grad_of(1).view({batch, seq, heads, head_dim}).transpose(1, 2), contiguous.grad_k) < 1e-12);
  CHECK(max_abs_difference(grad_of(3).view({batch, seq, heads, head_dim}).transpose(1, 2), contiguous.grad_v) < 1e-12);
  CHECK(max_abs_difference(grad_of(2), zeros({batch, seq, channels}, {.dtype = DType::Float64})) == 0.0);
}

TEST_CASE("the fused path's gradients on a packed projection's views match finite differences", "[attention]") {
  const bool causal = GENERATE(false, true);
  INFO("causal " << causal);
  AttentionOptions options = with_backend(AttentionBackend::Fused);
  options.is_causal = causal;
  const std::vector<Tensor> probe = gpt_heads(normal_values({2, 4, 3 * 8}, 104), 2);
  REQUIRE(attention_backend_for(probe[0], probe[1], probe[2], options) == AttentionBackend::Fused);
  GradcheckResult result = gradcheck(
      [&](const std::vector<Tensor>& in) {
        const std::vector<Tensor> qkv = gpt_heads(in[0], 2);
        return scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], options);
      },
      {normal_leaf({2, 4, 3 * 8}, 105)});
  INFO(result.message);
  CHECK(result.passed);
}
