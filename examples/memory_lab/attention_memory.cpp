// examples/memory_lab/attention_memory.cpp — experiment "attention_memory": the bytes one
// causal scaled_dot_product_attention with GPT-2's heads (12 heads of 64) saves for
// backward at several sequence lengths, on the math path and on the fused one.
//
// The math path materialises the (T, T) weights of every head and saves them (softmax's
// output, which the product with v saves too), beside the scaled copy of q and the causal
// mask; the fused path (FlashAttention-2's tiles) saves its output and one float32
// log-sum-exp per query row. q, k and v are the batch here (INPUT), so what is counted is
// what attention adds; in a block they are views of c_attn's output, saved either way.
//
// float32 on the CPU; bfloat16 on CUDA, where the fused kernels need 16-bit inputs.
#include <string>
#include <vector>

#include <memgrad/autograd/attention.h>
#include <memgrad/core/factory.h>
#include <memgrad/core/random.h>
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"

namespace memory_lab {
namespace {

constexpr int64_t kBatch = 1;
constexpr int64_t kHeads = 12;
constexpr int64_t kHeadDim = 64;
const std::vector<int64_t> kSequences = {128, 256, 512, 1024};

struct Saved {
  int64_t math;
  int64_t fused;
};

mg::Tensor random_heads(int64_t sequence, mg::DType dtype, mg::Device device, mg::Generator& generator) {
  return mg::randn({kBatch, kHeads, sequence, kHeadDim},
                   {.dtype = dtype, .device = device, .requires_grad = true, .category = mg::MemoryCategory::Input},
                   &generator);  // (B, H, T, D)
}

mg::AttentionOptions causal(mg::AttentionBackend backend) {
  mg::AttentionOptions options;
  options.is_causal = true;
  options.backend = backend;
  return options;
}

// ACTIVATION bytes held after the forward of attention over q, k and v on `backend`.
int64_t saved_bytes(const mg::Tensor& q, const mg::Tensor& k, const mg::Tensor& v, mg::AttentionBackend backend) {
  MemoryProbe probe(q.device());
  const mg::Tensor output = mg::scaled_dot_product_attention(q, k, v, causal(backend));
  return probe.current(mg::MemoryCategory::Activation);
}

}  // namespace

Result run_attention_memory(mg::Device device) {
  const mg::DType dtype = device.is_cuda() ? mg::DType::BFloat16 : mg::DType::Float32;
  const int64_t element = static_cast<int64_t>(mg::element_size(dtype));
  const std::string dtype_name = device.is_cuda() ? "bfloat16" : "float32";
  mg::Generator generator(0);
  std::vector<Saved> saved;
  mg::AttentionBackend automatic = mg::AttentionBackend::Math;
  for (int64_t sequence : kSequences) {
    const mg::Tensor q = random_heads(sequence, dtype, device, generator);
    const mg::Tensor k = random_heads(sequence, dtype, device, generator);
    const mg::Tensor v = random_heads(sequence, dtype, device, generator);
    saved.push_back({saved_bytes(q, k, v, mg::AttentionBackend::Math), saved_bytes(q, k, v, mg::AttentionBackend::Fused)});
    automatic = mg::attention_backend_for(q, k, v, causal(mg::AttentionBackend::Auto));
  }

  Result result;
  const std::string per_query = std::to_string(kBatch * kHeads) + " x T x ";
  for (size_t i = 0; i < kSequences.size(); ++i) {
    const int64_t t = kSequences[i];
    const std::string length = std::to_string(t);
    // weights (B, H, T, T) + scaled q (B, H, T, D) + the causal mask (T, T) of bools.
    const int64_t math = kBatch * kHeads * t * t * element + kBatch * kHeads * t * kHeadDim * element + t * t;
    // output (B, T, H, D) + log-sum-exp (B, H, T) float32.
    const int64_t fused = kBatch * kHeads * t * kHeadDim * element + kBatch * kHeads * t * 4;
    result.measurements.push_back(bytes("math_saved_t" + length + "_bytes", "ACTIVATION, math path, T = " + length,
                                        saved[i].math,
                                        per_query + "T x " + std::to_string(element) + " + " + per_query + "64 x " +
                                            std::to_string(element) + " + T x T x 1 = " + with_commas(math)));
    result.measurements.push_back(bytes("fused_saved_t" + length + "_bytes", "ACTIVATION, fused path, T = " + length,
                                        saved[i].fused,
                                        per_query + "64 x " + std::to_string(element) + " + " + per_query +
                                            "4 = " + with_commas(fused)));
  }
  // Growth over the last doubling: 4 for bytes in T^2, 2 for bytes in T.
  const double math_growth = static_cast<double>(saved.back().math) / saved[saved.size() - 2].math;
  const double fused_growth = static_cast<double>(saved.back().fused) / saved[saved.size() - 2].fused;
  const double fused_share = static_cast<double>(saved.back().fused) / saved.back().math;
  result.measurements.push_back(ratio("math_growth", "math path, T = 1024 / T = 512", math_growth,
                                      "just under 4: quadratic, with a linear part"));
  result.measurements.push_back(ratio("fused_growth", "fused path, T = 1024 / T = 512", fused_growth, "2: linear"));
  result.measurements.push_back(ratio("fused_over_math_t1024", "fused / math at T = 1024", fused_share));

  const bool math_quadratic = math_growth > 3.5, fused_quadratic = fused_growth > 3.5;
  result.verdict = math_quadratic == fused_quadratic ? (math_quadratic ? Verdict::True : Verdict::False)
                                                     : Verdict::Partly;
  result.why = "for the math path (" + dtype_name + "): doubling T to 1024 multiplied the saved bytes by " +
               format_ratio(math_growth) + " (the (T, T) weights of each head); the fused path's grew " +
               format_ratio(fused_growth) + "x and saved " + format_ratio(fused_share) +
               " of the math path's at T = 1024. Auto takes the " + mg::attention_backend_name(automatic) +
               " path on " + device.str() + ".";
  return result;
}

}  // namespace memory_lab
