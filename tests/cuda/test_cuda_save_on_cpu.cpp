// tests/cuda/test_cuda_save_on_cpu.cpp — SaveOnCpu on a GPU: a small conv + MLP forward
// under the guard leaves no ACTIVATION bytes on the device (its intermediate results are
// freed as the forward goes), the same bytes show as ACTIVATION of pinned (or pageable)
// host memory and are returned by backward, and the gradients equal those of a plain run,
// for NCHW and channels_last inputs and a transposed (non-dense) saved tensor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/save_on_cpu.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/runtime.h"

using namespace mg;

namespace {

struct Model {
  Tensor conv_weight, conv_bias, hidden_weight, hidden_bias, out_weight, out_bias;
};

// Parameters made on the CPU from `seed`, then moved: the same values on every call.
Model make_model(uint64_t seed) {
  Generator generator(seed);
  auto parameter = [&](const Shape& sizes, double scale) {
    Tensor values = converted_copy(randn(sizes, {}, &generator) * scale, DType::Float32, Device::cuda());
    return values.set_memory_category(MemoryCategory::Parameter).requires_grad_();
  };
  return {parameter({8, 3, 3, 3}, 0.2), parameter({8}, 0.1),
          parameter({64, 8 * 16 * 16}, 0.02), parameter({64}, 0.1),
          parameter({10, 64}, 0.1), parameter({10}, 0.1)};
}

struct Batch {
  Tensor images;  // (32, 3, 16, 16)
  Tensor labels;  // (32) int64
};

Batch make_batch(MemoryFormat format) {
  Generator generator(7);
  Tensor images = converted_copy(randn({32, 3, 16, 16}, {}, &generator), DType::Float32, Device::cuda());
  Tensor labels = converted_copy(randint(0, 10, {32}, {.dtype = DType::Int64}, &generator), DType::Int64,
                                 Device::cuda());
  images = contiguous_copy(images, format);
  images.set_memory_category(MemoryCategory::Input);
  labels.set_memory_category(MemoryCategory::Input);
  return {images, labels};
}

// conv -> relu -> flatten -> linear -> relu -> linear -> cross_entropy, plus a term whose
// matmul saves a transposed view (copied to the host through a contiguous copy).
Tensor forward(const Model& model, const Batch& batch) {
  Tensor features = relu(conv2d(batch.images, model.conv_weight, model.conv_bias, {.padding = {1, 1}}));
  Tensor hidden = relu(linear(flatten(features, 1), model.hidden_weight, model.hidden_bias));
  Tensor logits = linear(hidden, model.out_weight, model.out_bias);
  return cross_entropy(logits, batch.labels) + mean(matmul(hidden.t(), hidden)) * 0.01;
}

std::vector<std::vector<double>> gradients(const Model& model) {
  std::vector<std::vector<double>> grads;
  for (const Tensor& parameter : {model.conv_weight, model.conv_bias, model.hidden_weight, model.hidden_bias,
                                  model.out_weight, model.out_bias}) {
    REQUIRE(parameter.grad().defined());
    grads.push_back(converted_copy(parameter.grad(), DType::Float64, Device::cpu()).to_vector<double>());
  }
  return grads;
}

// The largest |got - expected| over every gradient, relative to the largest |expected|.
double relative_error(const std::vector<std::vector<double>>& got,
                      const std::vector<std::vector<double>>& expected) {
  double scale = 1e-30, worst = 0.0;
  REQUIRE(got.size() == expected.size());
  for (size_t g = 0; g < expected.size(); ++g) {
    REQUIRE(got[g].size() == expected[g].size());
    for (size_t i = 0; i < expected[g].size(); ++i) {
      scale = std::max(scale, std::abs(expected[g][i]));
      double error = std::abs(got[g][i] - expected[g][i]);
      worst = std::isnan(error) ? INFINITY : std::max(worst, error);
    }
  }
  return worst / scale;
}

int64_t activation_bytes(CachingAllocator& allocator) {
  return allocator.stats().category(MemoryCategory::Activation).current;
}

// What one forward and backward cost and gave.
struct Run {
  int64_t device_activation = 0;     // ACTIVATION bytes on the device after the forward
  int64_t device_requested = 0;      // bytes tensors hold on the device after the forward
  int64_t host_activation = 0;       // ACTIVATION bytes of the host allocator after the forward
  int64_t host_activation_left = 0;  // ... and after backward
  std::vector<std::vector<double>> grads;
};

// `offload`: 0 plain, 1 SaveOnCpu with pinned memory, 2 SaveOnCpu with pageable memory.
Run run_step(int offload, MemoryFormat format) {
  CachingAllocator& device = allocator_for(Device::cuda());
  CachingAllocator& host = offload == 2 ? allocator_for(Device::cpu()) : cuda::pinned_host_allocator();
  Model model = make_model(1);
  Batch batch = make_batch(format);
  cuda::synchronize();
  int64_t device_before = activation_bytes(device), host_before = activation_bytes(host);
  int64_t requested_before = device.stats().requested_bytes.current;
  Tensor loss;
  if (offload == 0) {
    loss = forward(model, batch);
  } else {
    autograd::SaveOnCpu save_on_cpu(/*pin_memory=*/offload == 1);
    loss = forward(model, batch);
  }
  Run run;
  run.device_activation = activation_bytes(device) - device_before;
  run.device_requested = device.stats().requested_bytes.current - requested_before;
  run.host_activation = activation_bytes(host) - host_before;
  loss.backward();
  cuda::synchronize();
  CHECK(activation_bytes(device) == device_before);
  run.host_activation_left = activation_bytes(host) - host_before;
  run.grads = gradients(model);
  return run;
}

}  // namespace

TEST_CASE("SaveOnCpu keeps saved activations off the device with the same gradients", "[cuda][save_on_cpu]") {
  for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    for (int offload : {1, 2}) {
      INFO("images " << format << (offload == 1 ? ", pinned" : ", pageable") << " host memory");
      Run plain = run_step(0, format);
      Run offloaded = run_step(offload, format);
      // The plain run keeps conv/relu/linear/cross_entropy results on the device: at
      // least the (32, 8, 16, 16) float32 relu output.
      CHECK(plain.device_activation >= 32 * 8 * 16 * 16 * 4);
      CHECK(plain.host_activation == 0);
      // Under SaveOnCpu every intermediate is copied out and its device bytes freed;
      // parameters and inputs stay what they are. Tensors saved by two ops (a relu output
      // read by the next linear too) are copied twice, hence >=.
      CHECK(offloaded.device_activation == 0);
      CHECK(offloaded.host_activation >= plain.device_activation);
      CHECK(offloaded.device_requested <= plain.device_requested - plain.device_activation);
      CHECK(offloaded.host_activation_left == 0);
      CHECK(relative_error(offloaded.grads, plain.grads) < 1e-5);
    }
  }
}
