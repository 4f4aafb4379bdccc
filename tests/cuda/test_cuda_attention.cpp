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
//
// float32 (attention_simt_*.cu, FP32 FMA): the same kernel-level comparison against the CPU
// kernel in float32 on the same values, within 1e-5 of the largest value (both sides sum
// float32 products in different orders; the GPU's exp2 is within 2 ulp), over causal or
// not, dropout 0 or 0.3, Tq != Tk, T in {1, 17, 130}, head dims 13, 14, 16, 20, 64, 80,
// 128 (13: rows without 16-byte alignment, read 4 bytes at a time; 14: aligned rows whose
// last 16 bytes are cut short), packed views, misaligned buffers; the dropout mask against
// the contract's; and the op through autograd, fused against math in float32 on a packed
// projection (T up to 1024), with the Recorder and the node naming the fused path.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "memgrad/autograd/attention.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/recorder.h"
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
  int64_t row_padding = 0;  // q, k, v are the first head_dim of head_dim + row_padding values a row
};

std::string describe(const KernelCase& c, DType dtype, bool causal, double dropout_p) {
  std::ostringstream text;
  text << "B " << c.batch << " H " << c.heads << " Tq " << c.query_len << " Tk " << c.key_len << " D " << c.head_dim
       << " " << dtype_name(dtype) << (causal ? " causal" : "") << " dropout " << dropout_p
       << (c.misaligned ? " misaligned" : "") << (c.row_padding > 0 ? " padded rows" : "");
  return text.str();
}

// q, k, v (B, H, T, D) as views of packed projections on `device`.
struct Operands {
  Tensor q, k, v;
};
Operands packed_operands(const KernelCase& c, DType dtype, Device device, uint64_t seed) {
  const int64_t row = c.head_dim + c.row_padding;
  auto rows_of = [&](const Tensor& padded) { return narrow(padded, -1, 0, c.head_dim); };
  if (c.query_len == c.key_len) {
    Tensor packed = rows_of(
        buffer_on(normal_values({c.batch, c.query_len, 3, c.heads, row}, dtype, seed), device, c.misaligned));
    return {heads_first(select(packed, 2, 0)), heads_first(select(packed, 2, 1)), heads_first(select(packed, 2, 2))};
  }
  Tensor q_rows =
      rows_of(buffer_on(normal_values({c.batch, c.query_len, c.heads, row}, dtype, seed), device, c.misaligned));
  Tensor kv =
      rows_of(buffer_on(normal_values({c.batch, c.key_len, 2, c.heads, row}, dtype, seed + 1), device, c.misaligned));
  return {heads_first(q_rows), heads_first(select(kv, 2, 0)), heads_first(select(kv, 2, 1))};
}

Tensor as_float32_on_cpu(const Tensor& tensor) { return converted_copy(tensor, DType::Float32, Device::cpu()); }

// Values of `dtype` in (B, T, H, D + c.row_padding) memory on the GPU (one element off
// 16-byte alignment with c.misaligned), seen as (B, H, T, D): the first D of each row.
struct HeadRowsOnGpu {
  Tensor rows;     // (B, H, T, D)
  Tensor padding;  // (B, T, H, row_padding): what follows each row, which a kernel must not write
};
HeadRowsOnGpu head_rows_on_gpu(const KernelCase& c, const Tensor& padded_values) {
  Tensor placed = buffer_on(padded_values, kCuda, c.misaligned);
  return {heads_first(narrow(placed, -1, 0, c.head_dim)), narrow(placed, -1, c.head_dim, c.row_padding)};
}

// A (B, H, T, D) result buffer filled with garbage (7) the kernel must overwrite.
HeadRowsOnGpu result_buffer(const KernelCase& c, int64_t length, DType dtype) {
  return head_rows_on_gpu(c, full({c.batch, length, c.heads, c.head_dim + c.row_padding}, 7.0, {.dtype = dtype}));
}

void check_padding_untouched(const HeadRowsOnGpu& buffer, const std::string& what) {
  if (buffer.padding.numel() == 0) return;
  const std::vector<double> values = host_values(buffer.padding);
  INFO(what << ": the values after each row, 7 before the kernel ran");
  CHECK(std::count(values.begin(), values.end(), 7.0) == static_cast<std::ptrdiff_t>(values.size()));
}

}  // namespace

namespace {

// The CUDA kernels in `dtype` against kernels(cpu) in float32 on the same values, forward
// then backward (both sides given the GPU's output and log-sum-exp), each result within
// `tolerance` of its largest value (the log-sum-exp within `lse_tolerance`).
void check_kernels_against_cpu(const KernelCase& c, DType dtype, bool causal, double dropout_p, double tolerance,
                               double lse_tolerance) {
  INFO(describe(c, dtype, causal, dropout_p));
  const AttentionParams params{.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim)),
                               .is_causal = causal,
                               .dropout_p = dropout_p,
                               .rng = {.seed = 1234, .offset = 56}};

  const Operands gpu = packed_operands(c, dtype, kCuda, 11);
  const Operands cpu{as_float32_on_cpu(gpu.q), as_float32_on_cpu(gpu.k), as_float32_on_cpu(gpu.v)};

  // Forward.
  const HeadRowsOnGpu output_buffer = result_buffer(c, c.query_len, dtype);
  const Tensor& output = output_buffer.rows;
  Tensor log_sum_exp = empty({c.batch, c.heads, c.query_len}, {.device = kCuda});
  kernels(kCuda).attention_forward(gpu.q, gpu.k, gpu.v, params, output, log_sum_exp);
  Tensor cpu_output = empty({c.batch, c.heads, c.query_len, c.head_dim});
  Tensor cpu_log_sum_exp = empty({c.batch, c.heads, c.query_len});
  kernels(Device::cpu()).attention_forward(cpu.q, cpu.k, cpu.v, params, cpu_output, cpu_log_sum_exp);
  check_relative(output, cpu_output, tolerance, "output");
  check_relative(log_sum_exp, cpu_log_sum_exp, lse_tolerance, "log_sum_exp");
  check_padding_untouched(output_buffer, "output");

  // Backward, both sides from the GPU's output and log-sum-exp.
  const Tensor grad_output =
      head_rows_on_gpu(c, normal_values({c.batch, c.query_len, c.heads, c.head_dim + c.row_padding}, dtype, 12)).rows;
  const HeadRowsOnGpu grad_q_buffer = result_buffer(c, c.query_len, dtype);
  const HeadRowsOnGpu grad_k_buffer = result_buffer(c, c.key_len, dtype);
  const HeadRowsOnGpu grad_v_buffer = result_buffer(c, c.key_len, dtype);
  const Tensor &grad_q = grad_q_buffer.rows, &grad_k = grad_k_buffer.rows, &grad_v = grad_v_buffer.rows;
  kernels(kCuda).attention_backward(grad_output, gpu.q, gpu.k, gpu.v, output, log_sum_exp, params, grad_q, grad_k,
                                    grad_v);
  Tensor cpu_grad_q = empty(cpu.q.sizes()), cpu_grad_k = empty(cpu.k.sizes()), cpu_grad_v = empty(cpu.v.sizes());
  kernels(Device::cpu()).attention_backward(as_float32_on_cpu(grad_output), cpu.q, cpu.k, cpu.v,
                                            as_float32_on_cpu(output), log_sum_exp.to(Device::cpu()), params,
                                            cpu_grad_q, cpu_grad_k, cpu_grad_v);
  check_relative(grad_q, cpu_grad_q, tolerance, "grad_q");
  check_relative(grad_k, cpu_grad_k, tolerance, "grad_k");
  check_relative(grad_v, cpu_grad_v, tolerance, "grad_v");
  check_padding_untouched(grad_q_buffer, "grad_q");
  check_padding_untouched(grad_k_buffer, "grad_k");
  check_padding_untouched(grad_v_buffer, "grad_v");
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
  // The log-sum-exp: float32 sums of the same products.
  check_kernels_against_cpu(c, dtype, causal, dropout_p, kernel_tolerance(dtype), 1e-4);
}

TEST_CASE("CUDA fused attention kernels in float32 match the CPU reference (forward and backward)",
          "[cuda][attention]") {
  const KernelCase c = GENERATE(KernelCase{2, 3, 17, 17, 64, false}, KernelCase{1, 2, 1, 1, 16, false},
                                KernelCase{2, 2, 130, 130, 128, false}, KernelCase{1, 3, 17, 130, 80, false},
                                KernelCase{1, 2, 130, 17, 16, false}, KernelCase{1, 1, 1, 130, 128, false},
                                KernelCase{2, 2, 130, 130, 64, false}, KernelCase{1, 2, 77, 77, 20, false},
                                KernelCase{1, 2, 65, 100, 13, false}, KernelCase{1, 3, 130, 130, 14, false, 2},
                                KernelCase{1, 2, 77, 77, 64, true}, KernelCase{1, 2, 17, 130, 80, true});
  const bool causal = GENERATE(false, true);
  const double dropout_p = GENERATE(0.0, 0.3);
  check_kernels_against_cpu(c, DType::Float32, causal, dropout_p, 1e-5, 1e-5);
}

TEST_CASE("CUDA fused attention drops exactly the weights the math path drops", "[cuda][attention]") {
  // With v the identity (D = Tk = 64 keys) the output row i is the dropped, renormalised
  // weights of row i themselves: each is 0 exactly where the contract's mask drops (b, h, i, j).
  const DType dtype = GENERATE(DType::BFloat16, DType::Float32);
  INFO(dtype_name(dtype));
  const int64_t batch = 2, heads = 3, length = 64;
  const double dropout_p = 0.3;
  const AttentionParams params{.scale = 0.125, .is_causal = false, .dropout_p = dropout_p, .rng = {.seed = 7, .offset = 1000}};
  Tensor q = normal_values({batch, heads, length, length}, dtype, 21).to(kCuda);
  Tensor k = normal_values({batch, heads, length, length}, dtype, 22).to(kCuda);
  std::vector<double> identities(batch * heads * length * length, 0.0);  // (B, H, Tk, D) = (B, H, 64, 64)
  for (int64_t matrix = 0; matrix < batch * heads; ++matrix) {
    for (int64_t j = 0; j < length; ++j) identities[(matrix * length + j) * length + j] = 1.0;
  }
  Tensor v = converted_copy(from_vector(identities, {batch, heads, length, length}), dtype, kCuda);
  Tensor output = empty({batch, heads, length, length}, {.dtype = dtype, .device = kCuda});
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
  SECTION("float64") {
    Tensor x = operand(64, DType::Float64);
    CHECK_THROWS_WITH(forward(x, x, x), Catch::Contains("float16, bfloat16 or float32"));
  }
  SECTION("a 16-bit head dim that is not a multiple of 8") {
    Tensor x = operand(60, DType::BFloat16);
    CHECK_THROWS_WITH(forward(x, x, x), Catch::Contains("multiple of 8 in [8, 128]"));
  }
  SECTION("a head dim above 128") {
    Tensor x = operand(136, DType::Float16);
    CHECK_THROWS_WITH(forward(x, x, x), Catch::Contains("multiple of 8 in [8, 128]"));
    Tensor y = operand(136, DType::Float32);
    CHECK_THROWS_WITH(forward(y, y, y), Catch::Contains("head dim in [1, 128]"));
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

namespace {

// The GPT's q, k and v (nn/attention.cpp): (B, H, T, D) views of one packed (B, T, 3, H, D)
// leaf, whose gradient the fused backward writes whole.
struct PackedRun {
  Tensor output, grad_packed;
  std::string node;  // the output's grad_fn
};
PackedRun run_packed(const Tensor& packed_values, const Tensor& grad_output, bool causal, double dropout_p,
                     AttentionBackend backend) {
  Tensor packed = packed_values.detach().requires_grad_();
  Generator generator(77);  // the same dropout mask for both paths
  const AttentionOptions options{
      .is_causal = causal, .dropout_p = dropout_p, .backend = backend, .generator = &generator};
  Tensor output = scaled_dot_product_attention(heads_first(select(packed, 2, 0)), heads_first(select(packed, 2, 1)),
                                               heads_first(select(packed, 2, 2)), options);
  output.backward(grad_output);
  return {output.detach(), packed.grad(), output.grad_fn()->name()};
}

}  // namespace

TEST_CASE("scaled_dot_product_attention in float32 on CUDA: Auto runs the fused kernels, which agree with math",
          "[cuda][attention]") {
  // A gradcheck of the fused path against the math path in float32, on the GPT's packed
  // projection: output and the packed gradient within 2e-5 of their largest values (both
  // exact float32 products: cuBLAS without TF32 on the math side, FP32 FMA on the fused).
  const int64_t length = GENERATE(1, 17, 130, 1024);
  const bool causal = GENERATE(false, true);
  const double dropout_p = GENERATE(0.0, 0.1);
  const int64_t batch = 2, heads = 12, head_dim = 64;
  INFO("B 2 H 12 T " << length << " D 64 float32" << (causal ? " causal" : "") << " dropout " << dropout_p);
  const Tensor packed = normal_values({batch, length, 3, heads, head_dim}, DType::Float32, 41).to(kCuda);
  const Tensor grad_output = normal_values({batch, heads, length, head_dim}, DType::Float32, 42).to(kCuda);
  const Tensor q = heads_first(select(packed, 2, 0));
  CHECK(attention_backend_for(q, q, q, {.is_causal = causal}) == AttentionBackend::Fused);

  memory::Recorder recorder({.device = kCuda});
  recorder.start();
  const PackedRun automatic = run_packed(packed, grad_output, causal, dropout_p, AttentionBackend::Auto);
  recorder.stop();
  const std::vector<memory::MemoryEvent> events = recorder.timeline().events;
  auto allocations_by = [&](const std::string& op) {
    return std::count_if(events.begin(), events.end(), [&](const memory::MemoryEvent& event) {
      return event.kind == memory::EventKind::Allocate && event.op == op;
    });
  };
  CHECK(allocations_by("scaled_dot_product_attention[fused]") >= 2);  // the output and the log-sum-exp
  CHECK(allocations_by("scaled_dot_product_attention[math]") == 0);
  CHECK(automatic.node == "ScaledDotProductFusedAttentionBackward");

  const PackedRun math = run_packed(packed, grad_output, causal, dropout_p, AttentionBackend::Math);
  check_relative(automatic.output, math.output, 2e-5, "output: fused vs math");
  check_relative(automatic.grad_packed, math.grad_packed, 2e-5, "packed gradient: fused vs math");
}
