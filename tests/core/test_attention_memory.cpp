// tests/core/test_attention_memory.cpp — what one scaled_dot_product_attention call keeps
// for backward (ACTIVATION bytes, as the allocator's categories count them), on the
// simulated device standing in for a GPU and on the CPU: the math path's bytes grow with
// the square of the sequence, the fused path's linearly, both exactly as predicted; and
// the Recorder names the path that ran.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

#include "memgrad/autograd/attention.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/memory/recorder.h"
#include "memgrad/memory/simulated_target.h"

namespace {

using mg::AttentionBackend;
using mg::Device;
using mg::DType;
using mg::MemoryCategory;
using mg::Tensor;

constexpr int64_t kBatch = 2, kHeads = 4, kHeadDim = 64;

int64_t activation_bytes(Device device) {
  return mg::memory::snapshot(device).category(MemoryCategory::Activation).current;
}

// The ACTIVATION bytes the graph of one call holds, with q, k, v (B, H, T, D) leaves that
// require grad. The leaves are tagged INPUT, so only what the op itself keeps is counted;
// backward must give all of it back.
int64_t activation_bytes_of_one_call(Device device, DType dtype, int64_t seq, AttentionBackend backend,
                                     double dropout_p = 0.0) {
  const mg::TensorOptions options{.dtype = dtype, .device = device, .requires_grad = true,
                                  .category = MemoryCategory::Input};
  mg::Generator generator(1);
  auto leaf = [&] { return mg::randn({kBatch, kHeads, seq, kHeadDim}, options, &generator); };
  const Tensor q = leaf(), k = leaf(), v = leaf();
  mg::AttentionOptions attention;
  attention.backend = backend;
  attention.dropout_p = dropout_p;
  attention.generator = &generator;

  const int64_t before = activation_bytes(device);
  Tensor output = mg::scaled_dot_product_attention(q, k, v, attention);
  const int64_t held = activation_bytes(device) - before;
  output.backward(mg::ones_like(output));
  CHECK(activation_bytes(device) == before);
  return held;
}

// What the simulated device holds for the GPU's run, for three sequence lengths.
struct Growth {
  int64_t at_128, at_256, at_512;
};
Growth growth(Device device, DType dtype, AttentionBackend backend, double dropout_p = 0.0) {
  return {activation_bytes_of_one_call(device, dtype, 128, backend, dropout_p),
          activation_bytes_of_one_call(device, dtype, 256, backend, dropout_p),
          activation_bytes_of_one_call(device, dtype, 512, backend, dropout_p)};
}

// bytes(2T) - 2 bytes(T) removes the linear part; what is left grows 4x when T doubles
// when the rest is quadratic.
void check_quadratic(const Growth& bytes) {
  const int64_t quadratic_small = bytes.at_256 - 2 * bytes.at_128;
  const int64_t quadratic_large = bytes.at_512 - 2 * bytes.at_256;
  CHECK(quadratic_small > 0);
  CHECK(quadratic_large == 4 * quadratic_small);
  CHECK(static_cast<double>(bytes.at_512) / static_cast<double>(bytes.at_256) > 3.5);
}

void check_linear(const Growth& bytes) {
  CHECK(bytes.at_256 == 2 * bytes.at_128);
  CHECK(bytes.at_512 == 2 * bytes.at_256);
}

}  // namespace

TEST_CASE("predicted for a GPU: math attention keeps T^2 bytes, fused attention 2x per doubling",
          "[attention][memory][simulated]") {
  const Device simulated = Device::simulated(9);
  mg::SimulatedTarget target(Device::cuda(), simulated, size_t{4} << 30);

  // float16, B = 2, H = 4, D = 64, so B * H * T * D * 2 bytes = 1024 T.
  // Fused: the output (1024 T) and the float32 log-sum-exp, B * H * T * 4 = 32 T:
  //   1056 T = 135168, 270336, 540672 bytes.
  const Growth fused = growth(simulated, DType::Float16, AttentionBackend::Auto);  // Auto is fused on CUDA
  CHECK(fused.at_128 == 135168);
  CHECK(fused.at_256 == 270336);
  CHECK(fused.at_512 == 540672);
  check_linear(fused);

  // Math: q * scale (saved by the first product, 1024 T) and the softmax's weights
  // (B * H * T * T * 2 = 16 T^2, saved by softmax and the second product alike):
  //   1024 T + 16 T^2 = 393216, 1310720, 4718592 bytes.
  const Growth math = growth(simulated, DType::Float16, AttentionBackend::Math);
  CHECK(math.at_128 == 393216);
  CHECK(math.at_256 == 1310720);
  CHECK(math.at_512 == 4718592);
  check_quadratic(math);

  // With dropout the math path also keeps dropout's bool mask (8 T^2) and the dropped
  // weights (16 T^2): 1024 T + 40 T^2. The fused path keeps no more than without.
  const Growth math_dropout = growth(simulated, DType::Float16, AttentionBackend::Math, 0.1);
  CHECK(math_dropout.at_128 == 1024 * 128 + 40 * 128 * 128);
  CHECK(math_dropout.at_512 == 1024 * 512 + 40 * 512 * 512);
  check_quadratic(math_dropout);
  CHECK(growth(simulated, DType::Float16, AttentionBackend::Fused, 0.1).at_512 == fused.at_512);
}

TEST_CASE("on the CPU: the same arithmetic in float32, on real kernels", "[attention][memory]") {
  // float32: B * H * T * D * 4 = 2048 T. Fused: 2048 T + 32 T; math: 2048 T + 32 T^2.
  const Growth fused = growth(Device::cpu(), DType::Float32, AttentionBackend::Fused);
  CHECK(fused.at_128 == 2080 * 128);
  CHECK(fused.at_512 == 2080 * 512);
  check_linear(fused);
  const Growth math = growth(Device::cpu(), DType::Float32, AttentionBackend::Math);
  CHECK(math.at_128 == 2048 * 128 + 32 * 128 * 128);
  CHECK(math.at_512 == 2048 * 512 + 32 * 512 * 512);
  check_quadratic(math);
}

TEST_CASE("the Recorder names the attention path that ran", "[attention][memory][recorder]") {
  const AttentionBackend backend = GENERATE(AttentionBackend::Math, AttentionBackend::Fused);
  const bool fused = backend == AttentionBackend::Fused;
  INFO(mg::attention_backend_name(backend));
  const mg::TensorOptions options{.dtype = DType::Float32, .requires_grad = true};
  mg::Generator generator(2);
  const Tensor q = mg::randn({1, 2, 8, 16}, options, &generator), k = mg::randn({1, 2, 8, 16}, options, &generator);
  const Tensor v = mg::randn({1, 2, 8, 16}, options, &generator);
  mg::AttentionOptions attention;
  attention.backend = backend;
  attention.is_causal = true;

  mg::memory::Recorder recorder({.device = Device::cpu()});
  recorder.start();
  Tensor output = mg::scaled_dot_product_attention(q, k, v, attention);
  output.backward(mg::ones_like(output));
  recorder.stop();

  const std::vector<mg::memory::MemoryEvent> events = recorder.timeline().events;
  auto allocations_by = [&](const std::string& op) {
    return std::count_if(events.begin(), events.end(), [&](const mg::memory::MemoryEvent& event) {
      return event.kind == mg::memory::EventKind::Allocate && event.op == op;
    });
  };
  const std::string ran = fused ? "scaled_dot_product_attention[fused]" : "scaled_dot_product_attention[math]";
  const std::string other = fused ? "scaled_dot_product_attention[math]" : "scaled_dot_product_attention[fused]";
  // Fused: the output and the log-sum-exp, then (backward) the three gradients under the
  // node's name. Math: the scaled q, the scores, the causal mask, the masked scores, the
  // weights and the output, then the gradients under the names of the ops it is made of.
  if (fused) {
    CHECK(allocations_by(ran) == 2);
    CHECK(allocations_by("ScaledDotProductFusedAttentionBackward") == 3);
  } else {
    CHECK(allocations_by(ran) >= 6);
    CHECK(allocations_by("SoftmaxBackward") == 1);
  }
  CHECK(allocations_by(other) == 0);
}
