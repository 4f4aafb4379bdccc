// tests/amp/late_conversion_checks.h — what the CPU and CUDA tests of autocast's gradients
// converted at backward's end (autograd/accumulate_grad.h) share: the working-set model's
// training step (tests/amp/working_set_checks.h) twice over, its parameters' 16-bit
// gradients converted into .grad in one batch at backward's end, against a copy whose
// parameters each carry a post-accumulate-grad hook, which makes them convert at once.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "amp/working_set_checks.h"
#include "memgrad/memgrad.h"

namespace mg_test {

// What backward left in the parameters' .grad, and what its first queued callback saw.
struct LateConversionStep {
  std::vector<std::vector<float>> gradients;
  std::vector<bool> defined_before_end;  // .grad defined when the first callback ran
};

inline LateConversionStep late_conversion_backward(const WorkingSetModel& model, const WorkingSetBatch& batch,
                                                   mg::DType dtype) {
  const std::vector<mg::Tensor> parameters = model.parameters();
  LateConversionStep step;
  mg::Tensor loss;
  {
    mg::amp::AutocastGuard autocast(dtype, batch.x.device().type);
    CacheProbe ignored;
    loss = working_set_loss(model, batch, &ignored, 0);
  }
  // The loss's gradient is the first of backward: a callback queued then runs first at
  // backward's end, before the conversion the parameters' first gradients queue.
  loss.register_hook([&](const mg::Tensor&) {
    mg::autograd::queue_callback([&] {
      for (const mg::Tensor& parameter : parameters) step.defined_before_end.push_back(parameter.grad().defined());
    });
    return mg::Tensor();
  });
  loss.backward();
  for (const mg::Tensor& parameter : parameters) {
    const mg::Tensor& gradient = parameter.grad();
    REQUIRE(gradient.defined());
    CHECK(gradient.dtype() == mg::DType::Float32);
    CHECK(gradient.memory_category() == mg::MemoryCategory::Gradient);
    CHECK(mg::is_contiguous_in(gradient, mg::suggest_memory_format(parameter)));
    step.gradients.push_back(gradient.to(mg::Device::cpu()).to_vector<float>());
  }
  return step;
}

// Two backward calls without zeroing (the first converts at its end; the second, whose
// parameters have a .grad already, adds at once), each against the hooked copy's.
inline void check_late_conversion(uint64_t seed, mg::Device device, mg::DType dtype) {
  WorkingSetModel model = make_working_set_model(seed, device);
  // A channels_last convolution weight: its .grad must come out channels_last too.
  model.kernel = model.kernel.detach()
                     .contiguous(mg::MemoryFormat::ChannelsLast)
                     .set_memory_category(mg::MemoryCategory::Parameter)
                     .requires_grad_();
  WorkingSetModel hooked = fresh_copy(model);
  hooked.kernel = hooked.kernel.detach()
                      .contiguous(mg::MemoryFormat::ChannelsLast)
                      .set_memory_category(mg::MemoryCategory::Parameter)
                      .requires_grad_();
  int hook_calls = 0;
  for (const mg::Tensor& parameter : hooked.parameters()) {
    parameter.register_post_accumulate_grad_hook([&](const mg::Tensor&) { ++hook_calls; });
  }
  const WorkingSetBatch batch = make_working_set_batch(seed + 1, device);
  const size_t count = model.parameters().size();
  for (int call = 0; call < 2; ++call) {
    INFO("backward call " << call);
    const LateConversionStep late = late_conversion_backward(model, batch, dtype);
    const LateConversionStep at_once = late_conversion_backward(hooked, batch, dtype);
    CHECK(hook_calls == static_cast<int>(count) * (call + 1));
    REQUIRE(late.gradients.size() == count);
    REQUIRE(late.defined_before_end.size() == count);
    for (size_t i = 0; i < count; ++i) {
      INFO("parameter " << i);
      CHECK(late.gradients[i] == at_once.gradients[i]);
      CHECK(at_once.defined_before_end[i]);
      // The first call's gradients wait for its end; the second's add into .grad at once. w2
      // (index 2) is also used through its transposed view, whose cast is no parameter's: its
      // float32 gradient joins the 16-bit one before the leaf, which takes the sum at once.
      const bool converts_at_once = call == 1 || i == 2;
      CHECK(late.defined_before_end[i] == converts_at_once);
    }
  }
}

}  // namespace mg_test
