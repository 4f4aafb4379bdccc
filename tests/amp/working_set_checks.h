// tests/amp/working_set_checks.h — what the CPU and CUDA tests of autocast's working sets
// (autocast/weight_cast_cache.h) share: a small model of linear layers and a convolution,
// a training step under autocast that reports the cache as its first op left it, and fresh
// copies of a model (new parameters with the same values: no region has begun with them,
// so every cast of theirs is made alone — the path without working sets).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "memgrad/memgrad.h"

namespace mg_test {

// An MLP whose second weight is used twice (once through a transposed view, which is no
// parameter and is cast on its own), and a small CNN with a linear head: seven parameters.
struct WorkingSetModel {
  mg::Tensor w1, b1, w2, b2, kernel, kernel_bias, head;

  std::vector<mg::Tensor> parameters() const { return {w1, b1, w2, b2, kernel, kernel_bias, head}; }
};

struct WorkingSetBatch {
  mg::Tensor x, target, image, image_target;
};

// The cache as a forward left it, in entries and AUTOCAST_CACHE bytes (over `bytes_before`).
struct CacheProbe {
  size_t casts = 0;
  int64_t bytes = 0;
};

// What one training step gave.
struct WorkingSetStep {
  CacheProbe after_first_op;  // after linear(x, w1, b1)
  CacheProbe after_forward;
  std::vector<float> loss;
  std::vector<std::vector<float>> gradients;  // one per parameter, in parameters()'s order
  bool every_gradient_defined = true;
};

inline mg::Tensor working_set_parameter(const mg::Shape& sizes, mg::Generator& generator, mg::Device device,
                                        double scale = 0.3) {
  mg::Tensor values = mg::randn(sizes, {}, &generator);
  values.mul_(scale);
  return values.to(device).set_memory_category(mg::MemoryCategory::Parameter).requires_grad_();
}

inline WorkingSetModel make_working_set_model(uint64_t seed, mg::Device device) {
  mg::Generator generator(seed);
  WorkingSetModel model;
  model.w1 = working_set_parameter({20, 12}, generator, device);
  model.b1 = working_set_parameter({20}, generator, device);
  model.w2 = working_set_parameter({5, 20}, generator, device);
  model.b2 = working_set_parameter({5}, generator, device);
  model.kernel = working_set_parameter({3, 2, 3, 3}, generator, device);
  model.kernel_bias = working_set_parameter({3}, generator, device);
  model.head = working_set_parameter({5, 3 * 6 * 6}, generator, device, 0.1);
  return model;
}

inline WorkingSetBatch make_working_set_batch(uint64_t seed, mg::Device device) {
  mg::Generator generator(seed);
  WorkingSetBatch batch;
  batch.x = mg::randn({16, 12}, {}, &generator).to(device);
  batch.target = mg::randint(0, 5, {16}, {.dtype = mg::DType::Int64}, &generator).to(device);
  batch.image = mg::randn({4, 2, 6, 6}, {}, &generator).to(device);
  batch.image_target = mg::randint(0, 5, {4}, {.dtype = mg::DType::Int64}, &generator).to(device);
  return batch;
}

// New parameters holding the model's values.
inline WorkingSetModel fresh_copy(const WorkingSetModel& model) {
  auto copy = [](const mg::Tensor& parameter) {
    return parameter.detach().clone().set_memory_category(mg::MemoryCategory::Parameter).requires_grad_();
  };
  return {copy(model.w1),     copy(model.b1),          copy(model.w2),  copy(model.b2),
          copy(model.kernel), copy(model.kernel_bias), copy(model.head)};
}

inline CacheProbe probe_cache(mg::Device device, int64_t bytes_before) {
  return {mg::amp::autocast_cache_size(),
          mg::memory::snapshot(device).category(mg::MemoryCategory::AutocastCache).current - bytes_before};
}

// The model's loss on the batch, the first op being linear(x, w1, b1); `after_first_op`
// receives the cache as that op left it.
inline mg::Tensor working_set_loss(const WorkingSetModel& model, const WorkingSetBatch& batch,
                                   CacheProbe* after_first_op, int64_t bytes_before) {
  mg::Tensor hidden = mg::linear(batch.x, model.w1, model.b1);
  *after_first_op = probe_cache(batch.x.device(), bytes_before);
  hidden = mg::relu(hidden);
  mg::Tensor logits = mg::add(mg::linear(hidden, model.w2, model.b2), mg::matmul(hidden, model.w2.t()));
  mg::Tensor features =
      mg::relu(mg::conv2d(batch.image, model.kernel, model.kernel_bias, {.padding = {1, 1}})).flatten(1);
  return mg::add(mg::cross_entropy(logits, batch.target),
                 mg::cross_entropy(mg::linear(features, model.head), batch.image_target));
}

// One step: the forward under autocast to `dtype`, backward outside the region, then SGD
// (lr 0.1) in place, which bumps every parameter's version as an optimizer does.
inline WorkingSetStep working_set_step(const WorkingSetModel& model, const WorkingSetBatch& batch, mg::DType dtype) {
  const mg::Device device = batch.x.device();
  const std::vector<mg::Tensor> parameters = model.parameters();
  for (const mg::Tensor& parameter : parameters) parameter.set_grad(mg::Tensor());
  const int64_t bytes_before = probe_cache(device, 0).bytes;
  WorkingSetStep step;
  mg::Tensor loss;
  {
    mg::amp::AutocastGuard autocast(dtype, device.type);
    loss = working_set_loss(model, batch, &step.after_first_op, bytes_before);
    step.after_forward = probe_cache(device, bytes_before);
  }
  loss.backward();
  step.loss = loss.to(mg::Device::cpu()).to_vector<float>();
  mg::NoGradGuard no_grad;
  for (const mg::Tensor& parameter : parameters) {
    const mg::Tensor& gradient = parameter.grad();
    step.every_gradient_defined = step.every_gradient_defined && gradient.defined();
    if (!gradient.defined()) continue;
    step.gradients.push_back(gradient.to(mg::Device::cpu()).to_vector<float>());
    parameter.add_(gradient, -0.1);
  }
  return step;
}

// Three steps of `model` (the first learns its working set, the next two cast it at their
// first op) against the same steps of fresh copies (every cast alone): the same losses and
// gradients bit for bit, and the same copies in the cache by the forward's end.
inline void check_working_set_steps(uint64_t seed, mg::Device device, mg::DType dtype) {
  WorkingSetModel model = make_working_set_model(seed, device);
  WorkingSetModel reference = fresh_copy(model);
  const WorkingSetBatch batch = make_working_set_batch(seed + 1, device);
  const size_t parameter_count = model.parameters().size();
  for (int iteration = 0; iteration < 3; ++iteration) {
    INFO("step " << iteration);
    reference = fresh_copy(reference);
    const WorkingSetStep alone = working_set_step(reference, batch, dtype);
    const WorkingSetStep batched = working_set_step(model, batch, dtype);
    CHECK(alone.after_first_op.casts == 2);  // w1 and b1
    CHECK(batched.after_first_op.casts == (iteration == 0 ? 2 : parameter_count));
    if (iteration > 0) CHECK(batched.after_first_op.bytes == alone.after_forward.bytes);
    CHECK(batched.after_forward.casts == parameter_count);
    CHECK(batched.after_forward.bytes == alone.after_forward.bytes);
    CHECK(batched.loss == alone.loss);
    REQUIRE(batched.every_gradient_defined);
    REQUIRE(alone.every_gradient_defined);
    for (size_t i = 0; i < parameter_count; ++i) {
      INFO("parameter " << i);
      CHECK(batched.gradients[i] == alone.gradients[i]);
    }
  }
  CHECK(mg::amp::autocast_cache_size() == 0);
}

}  // namespace mg_test
