// tests/cuda/test_cuda_attention.cpp — the fused attention kernels (cuda/kernels/
// attention_*.cu) against the CPU reference kernel, and the fused op against the math op.
//
// Kernel level: the CUDA kernels in float16 / bfloat16 against kernels(cpu) in float32 on
// the very same (rounded) values, forward (output, log-sum-exp) and backward (the three
// gradients, both sides given the GPU's output and log-sum-exp so that only the backward's
// arithmetic is compared), causal or not, dropout 0 or 0.3 with one generator state (the
// same mask on both sides), head dims 8, 40, 64, 128, sequences that are not multiples of
// the tiles (1, 77, 200), Tq == Tk and Tq != Tk. Operands are strided views as the op makes
// them: q, k, v slots of one packed (B, T, 3, H, D) projection (k, v of a (B, Tk, 2, H, D)
// one when Tq != Tk), the output and grad_output (B, Tq, H, D) memory seen as (B, H, Tq, D),
// and in some cases every operand one element off 16-byte alignment (the copy path).
// Tolerance: max |cuda - cpu| <= tol x max |cpu| per tensor, tol 1e-2 for bfloat16 and
// 3e-3 for float16 (the probabilities and dS enter the tensor cores rounded to the dtype:
// 2^-9 / 2^-12 relative each).
//
// Op level (the acceptance check): mg::scaled_dot_product_attention on CUDA with
// the Fused and the Math backend through autograd, B = 4, H = 12, T in {128, 1024, 2048},
// D = 64, causal or not, bfloat16 and float16: the output and the three gradients of both
// agree within 2e-2 (bfloat16) / 5e-3 (float16) of the largest value, and the fused ones
// are as close to the math path run in float32.
//
// The cases cover each kernel configuration (attention_forward.cu, attention_backward.cu:
// head dim <= 64 or 128, with and without dropout, float16 and bfloat16).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/attention.h"
#include "autograd/grad_mode.h"
#include "autograd/shape.h"
#include "core/factory.h"
#include "cuda/kernel_checks.h"

using namespace mg;

namespace {

using cuda_checks::host_values;
using cuda_checks::kCuda;

double kernel_tolerance(DType dtype) { return dtype == DType::BFloat16 ? 1e-2 : 3e-3; }

// max |actual - expected| <= tol x max |expected| (plus a hair for all-zero tensors).
void check_relative(const Tensor& actual, const Tensor& expected, double tolerance, const std::string& what) {
  INFO(what);
  REQUIRE(actual.sizes() == expected.sizes());
  std::vector<double> got = host_values(actual), want = host_values(expected);
  double scale = 0.0, worst = 0.0;
  size_t worst_at = 0;
  for (double value : want) scale = std::max(scale, std::abs(value));
  for (size_t i = 0; i < want.size(); ++i) {
    double difference = std::abs(got[i] - want[i]);
    if (!(difference <= worst)) {  // NaN counts as the worst
      worst = std::isnan(difference) ? INFINITY : difference;
      worst_at = i;
    }
  }
  INFO("largest difference " << worst << " at " << worst_at << " (got " << got[worst_at] << ", want "
                             << want[worst_at] << ") against scale " << scale);
  CHECK(worst <= tolerance * scale + 1e-6);
}

// Random values of `dtype` on the CPU, in [-2, 2]-ish (normal).
Tensor normal_values(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return converted_copy(randn(sizes, {.dtype = DType::Float64}, &generator), dtype, Device::cpu());
}

// A buffer of `sizes` on `device`; with `misaligned` it starts one element into a larger
// one, so that no row is 16-byte aligned.
Tensor buffer_on(const Tensor& values, Device device, bool misaligned) {
  Tensor placed = values.to(device);
  if (!misaligned) return placed;
  Tensor base = zeros({values.numel() + 1}, {.dtype = values.dtype(), .device = device});
  Tensor view = reshape(narrow(base, 0, 1, values.numel()), values.sizes());
  kernels(device).copy(placed, view);
  return view;
}

// (B, T, H, D) memory seen as (B, H, T, D).
Tensor heads_first(const Tensor& rows_first) { return transpose(rows_first, 1, 2); }

struct KernelCase {
  int64_t batch, heads, query_len, key_len, head_dim;
  bool misaligned;
};

std::string describe(const KernelCase& c, DType dtype, bool causal, double dropout_p) {
  std::ostringstream text;
  text << "B " << c.batch << " H " << c.heads << " Tq " << c.query_len << " Tk " << c.key_len << " D " << c.head_dim
       << " " << dtype_name(dtype) << (causal ? " causal" : "") << " dropout " << dropout_p
       << (c.misaligned ? " misaligned" : "");
  return text.str();
}

// q, k, v (B, H, T, D) as views of packed projections on `device`.
struct Operands {
  Tensor q, k, v;
};
Operands packed_operands(const KernelCase& c, DType dtype, Device device, uint64_t seed) {
  if (c.query_len == c.key_len) {
    Tensor packed = buffer_on(normal_values({c.batch, c.query_len, 3, c.heads, c.head_dim}, dtype, seed), device,
                              c.misaligned);
    return {heads_first(select(packed, 2, 0)), heads_first(select(packed, 2, 1)), heads_first(select(packed, 2, 2))};
  }
  Tensor q_rows = buffer_on(normal_values({c.batch, c.query_len, c.heads, c.head_dim}, dtype, seed), device,
                            c.misaligned);
  Tensor kv = buffer_on(normal_values({c.batch, c.key_len, 2, c.heads, c.head_dim}, dtype, seed + 1), device,
                        c.misaligned);
  return {heads_first(q_rows), heads_first(select(kv, 2, 0)), heads_first(select(kv, 2, 1))};
}

Tensor as_float32_on_cpu(const Tensor& tensor) { return converted_copy(tensor, DType::Float32, Device::cpu()); }

// A (B, H, T, D) result buffer seen through (B, T, H, D) memory, filled with garbage the
// kernel must overwrite.
Tensor result_buffer(int64_t batch, int64_t heads, int64_t length, int64_t head_dim, DType dtype, bool misaligned) {
  Tensor garbage = full({batch, length, heads, head_dim}, 7.0, {.dtype = dtype});
  return heads_first(buffer_on(garbage, kCuda, misaligned));
}

}  // namespace

TEST_CASE("CUDA fused attention kernels match the CPU reference (forward and backward)", "[cuda][attention]") {
  const KernelCase c = GENERATE(KernelCase{2, 3, 77, 77, 64, false}, KernelCase{1, 2, 1, 1, 40, false},
                                KernelCase{2, 2, 200, 200, 128, false}, KernelCase{1, 3, 77, 200, 8, false},
                                KernelCase{1, 2, 200, 77, 40, false}, KernelCase{2, 2, 128, 128, 64, false},
                                KernelCase{1, 1, 1, 77, 64, false}, KernelCase{1, 2, 130, 130, 128, false},
                                KernelCase{1, 2, 77, 77, 64, true}, KernelCase{1, 2, 65, 100, 72, true});
  const DType dtype = GENERATE(DType::Float16, DType::BFloat16);
  const bool causal = GENERATE(false, true);
  const double dropout_p = GENERATE(0.0, 0.3);
  INFO(describe(c, dtype, causal, dropout_p));
  const double tolerance = kernel_tolerance(dtype);
  const AttentionParams params{.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim)),
                               .is_causal = causal,
                               .dropout_p = dropout_p,
                               .rng = {.seed = 1234, .offset = 56}};

  const Operands gpu = packed_operands(c, dtype, kCuda, 11);
  const Operands cpu{as_float32_on_cpu(gpu.q), as_float32_on_cpu(gpu.k), as_float32_on_cpu(gpu.v)};

  // Forward.
  Tensor output = result_buffer(c.batch, c.heads, c.query_len, c.head_dim, dtype, c.misaligned);
  Tensor log_sum_exp = empty({c.batch, c.heads, c.query_len}, {.device = kCuda});
  kernels(kCuda).attention_forward(gpu.q, gpu.k, gpu.v, params, output, log_sum_exp);
  Tensor cpu_output = empty({c.batch, c.heads, c.query_len, c.head_dim});
  Tensor cpu_log_sum_exp = empty({c.batch, c.heads, c.query_len});
  kernels(Device::cpu()).attention_forward(cpu.q, cpu.k, cpu.v, params, cpu_output, cpu_log_sum_exp);
  check_relative(output, cpu_output, tolerance, "output");
  check_relative(log_sum_exp, cpu_log_sum_exp, 1e-4, "log_sum_exp");  // float32 sums of the same products

  // Backward, both sides from the GPU's output and log-sum-exp.
  Tensor grad_output = heads_first(buffer_on(
      normal_values({c.batch, c.query_len, c.heads, c.head_dim}, dtype, 12), kCuda, c.misaligned));
  Tensor grad_q = result_buffer(c.batch, c.heads, c.query_len, c.head_dim, dtype, c.misaligned);
  Tensor grad_k = result_buffer(c.batch, c.heads, c.key_len, c.head_dim, dtype, c.misaligned);
  Tensor grad_v = result_buffer(c.batch, c.heads, c.key_len, c.head_dim, dtype, c.misaligned);
  kernels(kCuda).attention_backward(grad_output, gpu.q, gpu.k, gpu.v, output, log_sum_exp, params, grad_q, grad_k,
                                    grad_v);
  Tensor cpu_grad_q = empty(cpu.q.sizes()), cpu_grad_k = empty(cpu.k.sizes()), cpu_grad_v = empty(cpu.v.sizes());
  kernels(Device::cpu()).attention_backward(as_float32_on_cpu(grad_output), cpu.q, cpu.k, cpu.v,
                                            as_float32_on_cpu(output), log_sum_exp.to(Device::cpu()), params,
                                            cpu_grad_q, cpu_grad_k, cpu_grad_v);
  check_relative(grad_q, cpu_grad_q, tolerance, "grad_q");
  check_relative(grad_k, cpu_grad_k, tolerance, "grad_k");
  check_relative(grad_v, cpu_grad_v, tolerance, "grad_v");
}

TEST_CASE("CUDA fused attention drops exactly the weights the math path drops", "[cuda][attention]") {
  // With v the identity (D = Tk = 64 keys) the output row i is the dropped, renormalised
  // weights of row i themselves: each is 0 exactly where the contract's mask drops (b, h, i, j).
  const int64_t batch = 2, heads = 3, length = 64;
  const double dropout_p = 0.3;
  const AttentionParams params{.scale = 0.125, .is_causal = false, .dropout_p = dropout_p, .rng = {.seed = 7, .offset = 1000}};
  Tensor q = normal_values({batch, heads, length, length}, DType::BFloat16, 21).to(kCuda);
  Tensor k = normal_values({batch, heads, length, length}, DType::BFloat16, 22).to(kCuda);
  std::vector<double> identities(batch * heads * length * length, 0.0);  // (B, H, Tk, D) = (B, H, 64, 64)
  for (int64_t matrix = 0; matrix < batch * heads; ++matrix) {
    for (int64_t j = 0; j < length; ++j) identities[(matrix * length + j) * length + j] = 1.0;
  }
  Tensor v = converted_copy(from_vector(identities, {batch, heads, length, length}), DType::BFloat16, kCuda);
  Tensor output = empty({batch, heads, length, length}, {.dtype = DType::BFloat16, .device = kCuda});
  Tensor log_sum_exp = empty({batch, heads, length}, {.device = kCuda});
  kernels(kCuda).attention_forward(q, k, v, params, output, log_sum_exp);
  std::vector<double> weights = host_values(output);
  int64_t mismatches = 0, dropped = 0;
  for (int64_t index = 0; index < static_cast<int64_t>(weights.size()); ++index) {
    const bool kept = uniform_from_bits(philox_block(params.rng, static_cast<uint64_t>(index))[0]) >=
                      static_cast<float>(dropout_p);
    dropped += kept ? 0 : 1;
    if (kept != (weights[index] != 0.0)) ++mismatches;
  }
  INFO(dropped << " of " << weights.size() << " weights dropped");
  CHECK(mismatches == 0);
  CHECK(std::abs(static_cast<double>(dropped) / weights.size() - dropout_p) < 0.02);
}

TEST_CASE("CUDA fused attention kernels reject what they cannot run", "[cuda][attention]") {
  auto operand = [](int64_t head_dim, DType dtype) {
    return zeros({1, 2, 16, head_dim}, {.dtype = dtype, .device = kCuda});
  };
  const AttentionParams params{.scale = 0.125, .is_causal = false, .dropout_p = 0.0, .rng = {}};
  auto forward = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor output = empty(q.sizes(), {.dtype = q.dtype(), .device = kCuda});
    Tensor log_sum_exp = empty({q.sizes()[0], q.sizes()[1], q.sizes()[2]}, {.device = kCuda});
    kernels(kCuda).attention_forward(q, k, v, params, output, log_sum_exp);
  };
  SECTION("float32") {
    Tensor x = operand(64, DType::Float32);
    CHECK_THROWS_WITH(forward(x, x, x), Catch::Contains("float16 or bfloat16"));
  }
  SECTION("a head dim that is not a multiple of 8") {
    Tensor x = operand(60, DType::BFloat16);
    CHECK_THROWS_WITH(forward(x, x, x), Catch::Contains("multiple of 8 in [8, 128]"));
  }
  SECTION("a head dim above 128") {
    Tensor x = operand(136, DType::Float16);
    CHECK_THROWS_WITH(forward(x, x, x), Catch::Contains("multiple of 8 in [8, 128]"));
  }
  SECTION("a head dim without unit stride") {
    Tensor x = transpose(zeros({1, 2, 64, 16}, {.dtype = DType::Float16, .device = kCuda}), 2, 3);
    CHECK_THROWS_WITH(forward(x, x, x), Catch::Contains("unit stride"));
  }
}

// ---- the op: fused against math ----

namespace {

struct Gradients {
  Tensor output, grad_q, grad_k, grad_v;
};

// Output and gradients of one backend, from fresh leaves holding `q`, `k`, `v` (converted
// to `dtype`) and out.backward(grad_output).
Gradients run_op(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& grad_output, DType dtype,
                 bool causal, AttentionBackend backend) {
  Tensor q_leaf = q.to(dtype).detach().requires_grad_();
  Tensor k_leaf = k.to(dtype).detach().requires_grad_();
  Tensor v_leaf = v.to(dtype).detach().requires_grad_();
  Tensor output = scaled_dot_product_attention(q_leaf, k_leaf, v_leaf, {.is_causal = causal, .backend = backend});
  output.backward(grad_output.to(dtype));
  return {output.detach(), q_leaf.grad(), k_leaf.grad(), v_leaf.grad()};
}

}  // namespace

TEST_CASE("scaled_dot_product_attention: the fused backend agrees with the math backend on CUDA",
          "[cuda][attention]") {
  const int64_t length = GENERATE(128, 1024, 2048);
  const bool causal = GENERATE(false, true);
  const DType dtype = GENERATE(DType::BFloat16, DType::Float16);
  const int64_t batch = 4, heads = 12, head_dim = 64;
  INFO("B 4 H 12 T " << length << " D 64 " << dtype_name(dtype) << (causal ? " causal" : ""));
  const double tolerance = dtype == DType::BFloat16 ? 2e-2 : 5e-3;
  Tensor q = normal_values({batch, heads, length, head_dim}, dtype, 31).to(kCuda);
  Tensor k = normal_values({batch, heads, length, head_dim}, dtype, 32).to(kCuda);
  Tensor v = normal_values({batch, heads, length, head_dim}, dtype, 33).to(kCuda);
  Tensor grad_output = normal_values({batch, heads, length, head_dim}, dtype, 34).to(kCuda);
  REQUIRE(attention_backend_for(q, k, v, {.is_causal = causal, .backend = AttentionBackend::Fused}) ==
          AttentionBackend::Fused);

  const Gradients fused = run_op(q, k, v, grad_output, dtype, causal, AttentionBackend::Fused);
  const Gradients math = run_op(q, k, v, grad_output, dtype, causal, AttentionBackend::Math);
  const Gradients exact = run_op(q, k, v, grad_output, DType::Float32, causal, AttentionBackend::Math);
  const char* names[] = {"output", "grad_q", "grad_k", "grad_v"};
  const Tensor Gradients::*members[] = {&Gradients::output, &Gradients::grad_q, &Gradients::grad_k,
                                        &Gradients::grad_v};
  for (int i = 0; i < 4; ++i) {
    check_relative(fused.*members[i], math.*members[i], tolerance, std::string(names[i]) + ": fused vs math");
    check_relative(fused.*members[i], exact.*members[i], tolerance,
                   std::string(names[i]) + ": fused vs math in float32");
  }
}
