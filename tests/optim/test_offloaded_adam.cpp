// tests/optim/test_offloaded_adam.cpp — optim::OffloadedAdam/AdamW on the CPU: step for step
// bit-equal to optim::Adam/AdamW in float32 (several groups, weight decay, amsgrad, a
// learning-rate change, a step skipped as a GradScaler skips it); 16-bit parameters as
// AdamW with float32 master weights; checkpoints that resume exactly; the delayed update
// as plain AdamW one step behind; its state bytes under OPTIMIZER_STATE on the host.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "data/mnist_test_files.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/random.h"
#include "memgrad/cuda/cuda.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/optim/optim.h"

using namespace mg;

namespace {

// Three parameters of awkward sizes (one over the host kernel's 16384-element chunk).
std::vector<Tensor> make_params(uint64_t seed, DType dtype = DType::Float32) {
  Generator generator(seed);
  std::vector<Tensor> params;
  for (const Shape& shape : {Shape{7, 5}, Shape{13}, Shape{130, 131}}) {
    params.push_back(converted_copy(randn(shape, {}, &generator), dtype, Device::cpu()).requires_grad_());
  }
  return params;
}

std::vector<Tensor> copies(const std::vector<Tensor>& params) {
  std::vector<Tensor> result;
  for (const Tensor& param : params) result.push_back(contiguous_copy(param).requires_grad_());
  return result;
}

// Gradient `step` of parameter `index`: fixed by (step, index), independent of the values.
Tensor gradient(const Tensor& param, int step, size_t index) {
  Generator generator(1000 * step + index);
  return converted_copy(randn(param.sizes(), {}, &generator), param.dtype(), Device::cpu());
}

void set_gradients(const std::vector<Tensor>& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(gradient(params[i], step, i));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = converted_copy(a, DType::Float32, Device::cpu()).to_vector<float>();
  const std::vector<float> y = converted_copy(b, DType::Float32, Device::cpu()).to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

void check_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("parameter " << i);
    CHECK(same_bits(a[i], b[i]));
  }
}

// Two groups: decay and amsgrad in the first, neither in the second.
template <class Options>
std::vector<optim::ParamGroupOptions<Options>> two_groups(const std::vector<Tensor>& params) {
  return {{{params[0], params[2]}, Options{.lr = 3e-2, .weight_decay = 0.1, .amsgrad = true}},
          {{params[1]}, Options{.lr = 1e-2, .weight_decay = 0.0}}};
}

// One step of the loop both optimizers run: step 4 is skipped as after an overflow, step 7
// changes the learning rate.
void step_both(optim::Optimizer& reference, optim::Optimizer& offloaded, const std::vector<Tensor>& reference_params,
               const std::vector<Tensor>& offloaded_params, int step) {
  set_gradients(reference_params, step);
  set_gradients(offloaded_params, step);
  if (step == 7) {
    reference.set_group_lr(1, 5e-3);
    offloaded.set_group_lr(1, 5e-3);
  }
  const Tensor found_inf = full({1}, step == 4 ? 1.0 : 0.0);
  reference.step_skipping_if(found_inf);
  offloaded.step_skipping_if(found_inf);
  reference.zero_grad();
  offloaded.zero_grad();
}

}  // namespace

TEST_CASE("OffloadedAdamW: bit-equal to AdamW step for step on the CPU (groups, decay, amsgrad, skip, set_lr)",
          "[optim][offload]") {
  const std::vector<Tensor> reference_params = make_params(1), offloaded_params = copies(reference_params);
  optim::AdamW reference(two_groups<optim::AdamWOptions>(reference_params));
  optim::OffloadedAdamW offloaded(two_groups<optim::AdamWOptions>(offloaded_params));
  for (int step = 1; step <= 12; ++step) {
    step_both(reference, offloaded, reference_params, offloaded_params, step);
    INFO("step " << step);
    check_same(reference_params, offloaded_params);
  }
  for (size_t i = 0; i < reference_params.size(); ++i) {
    const optim::ParamState& expected = *reference.state(reference_params[i]);
    const optim::ParamState& got = *offloaded.state(offloaded_params[i]);
    CHECK(same_bits(expected.exp_avg, got.exp_avg));
    CHECK(same_bits(expected.exp_avg_sq, got.exp_avg_sq));
    CHECK(same_bits(expected.step, got.step));
    CHECK(same_bits(reference_params[i], got.master_param));
  }
}

TEST_CASE("OffloadedAdam: bit-equal to Adam (L2 decay) step for step on the CPU", "[optim][offload]") {
  const std::vector<Tensor> reference_params = make_params(2), offloaded_params = copies(reference_params);
  optim::Adam reference(two_groups<optim::AdamOptions>(reference_params));
  optim::OffloadedAdam offloaded(two_groups<optim::AdamOptions>(offloaded_params));
  for (int step = 1; step <= 10; ++step) {
    step_both(reference, offloaded, reference_params, offloaded_params, step);
    INFO("step " << step);
    check_same(reference_params, offloaded_params);
  }
}

TEST_CASE("OffloadedAdamW: 16-bit parameters step as AdamW on float32 master weights", "[optim][offload]") {
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    INFO(dtype);
    const std::vector<Tensor> params = make_params(3, dtype);
    // The reference: float32 AdamW on the same starting values and the same (widened) gradients.
    std::vector<Tensor> masters;
    for (const Tensor& param : params) masters.push_back(converted_copy(param, DType::Float32, Device::cpu()).requires_grad_());
    optim::AdamW reference(masters, {.lr = 1e-2, .weight_decay = 0.1});
    optim::OffloadedAdamW offloaded(params, {.lr = 1e-2, .weight_decay = 0.1});
    for (int step = 1; step <= 6; ++step) {
      set_gradients(params, step);
      for (size_t i = 0; i < params.size(); ++i) {
        masters[i].set_grad(converted_copy(params[i].grad(), DType::Float32, Device::cpu()));
      }
      reference.step();
      offloaded.step();
      for (size_t i = 0; i < params.size(); ++i) {
        INFO("step " << step << " parameter " << i);
        CHECK(same_bits(offloaded.state(params[i])->master_param, masters[i]));
        CHECK(same_bits(params[i], converted_copy(masters[i], dtype, Device::cpu())));
      }
    }
  }
}

TEST_CASE("OffloadedAdamW: a checkpoint resumes bit for bit, master weights included", "[optim][offload]") {
  mg_test::TempDir directory("offloaded-adam");
  const std::filesystem::path path = directory.path / "optimizer.safetensors";
  const std::vector<Tensor> params = make_params(4), resumed_params = copies(params);
  optim::OffloadedAdamW uninterrupted(two_groups<optim::AdamWOptions>(params));
  optim::OffloadedAdamW first_half(two_groups<optim::AdamWOptions>(resumed_params));
  for (int step = 1; step <= 3; ++step) {
    set_gradients(params, step);
    set_gradients(resumed_params, step);
    uninterrupted.step();
    first_half.step();
  }
  const optim::OptimizerStateDict saved = optim::state_dict(first_half);
  CHECK(saved.kind == "OffloadedAdamW");
  CHECK(std::any_of(saved.tensors.begin(), saved.tensors.end(),
                    [](const auto& entry) { return entry.first == "state.2.master_param"; }));
  optim::save(first_half, path.string());
  optim::OffloadedAdamW second_half(two_groups<optim::AdamWOptions>(resumed_params));
  optim::load(second_half, path.string());
  for (int step = 4; step <= 8; ++step) {
    set_gradients(params, step);
    set_gradients(resumed_params, step);
    uninterrupted.step();
    second_half.step();
  }
  check_same(params, resumed_params);
  // An AdamW checkpoint is another kind of file.
  optim::AdamW plain(copies(params));
  CHECK_THROWS_WITH(optim::load(plain, path.string()), Catch::Matchers::Contains("OffloadedAdamW"));
}

TEST_CASE("OffloadedAdamW delayed_update: after step() n the parameters are AdamW's after n - 1 steps",
          "[optim][offload]") {
  // The gradients are fixed per step (not computed at the parameters), so that both
  // optimizers see the same sequence g_1, g_2, ...: the delayed one applies g_n at step n + 1.
  const std::vector<Tensor> reference_params = make_params(5), delayed_params = copies(reference_params);
  optim::AdamW reference(two_groups<optim::AdamWOptions>(reference_params));
  optim::OffloadedAdamW delayed(two_groups<optim::AdamWOptions>(delayed_params), {.delayed_update = true});
  std::vector<Tensor> before = copies(reference_params);
  for (int step = 1; step <= 8; ++step) {
    set_gradients(delayed_params, step);
    delayed.step();
    delayed.zero_grad();
    INFO("step " << step);
    check_same(before, delayed_params);  // AdamW after step - 1 steps
    set_gradients(reference_params, step);
    reference.step();
    before = copies(reference_params);
  }
  delayed.finish_pending_update();
  check_same(reference_params, delayed_params);
}

TEST_CASE("OffloadedAdamW: its state is OPTIMIZER_STATE bytes on the host, 12 per element and a step counter",
          "[optim][offload]") {
  const std::vector<Tensor> params = make_params(6);
  int64_t elements = 0;
  for (const Tensor& param : params) elements += param.numel();
  optim::OffloadedAdamW offloaded(params);
  set_gradients(params, 1);
  const int64_t before = memory::snapshot(Device::cpu()).category(MemoryCategory::OptimizerState).current;
  offloaded.step();
  const int64_t after = memory::snapshot(Device::cpu()).category(MemoryCategory::OptimizerState).current;
  const int64_t expected = 12 * elements + 4 * static_cast<int64_t>(params.size());  // master, 2 moments, step
  CHECK(after - before == expected);
  CHECK(offloaded.state_bytes() == expected);
  // The report by place lists the host's bytes in their own column; no pinned memory
  // without a GPU.
  const std::string report = memory::host_and_device_report(Device::cpu());
  INFO(report);
  CHECK_THAT(report, Catch::Matchers::Contains("host (pinned)"));
  CHECK_THAT(report, Catch::Matchers::Contains(format_bytes(after)));
  if (!cuda::is_available()) CHECK(memory::pinned_host_snapshot().requested_bytes == 0);
}

TEST_CASE("OffloadedAdamW streams gradients during backward and copies again only those changed since",
          "[optim][offload]") {
  // On the CPU only the delayed update copies gradients (the plain one reads them in place),
  // and it streams them while no update is in flight: here finish_pending_update() before
  // each backward, as a loop that evaluates every step does. Real backward passes on a fixed
  // regression; both optimizers see the same gradients.
  const std::vector<Tensor> streamed_params = make_params(8), plain_params = copies(streamed_params);
  optim::OffloadedAdamW streamed(streamed_params, {.lr = 1e-2}, {.delayed_update = true});
  optim::OffloadedAdamW plain(plain_params, {.lr = 1e-2}, {.delayed_update = true, .stream_gradients = false});
  auto backward = [](const std::vector<Tensor>& params, int step) {
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor target = gradient(params[i], step, i);
      (params[i] - target).pow(2.0).mean().backward();
    }
  };
  for (int step = 1; step <= 6; ++step) {
    INFO("step " << step);
    streamed.finish_pending_update();
    plain.finish_pending_update();
    check_same(plain_params, streamed_params);
    for (const auto* params : {&streamed_params, &plain_params}) {
      backward(*params, step);
      if (step >= 3) backward(*params, step + 100);  // a second micro-batch accumulates
      if (step >= 5) optim::clip_grad_norm_(*params, 0.5);  // changes every gradient after backward
    }
    streamed.step();
    plain.step();
    streamed.zero_grad();
    plain.zero_grad();
    // Unchanged since backward, also after accumulating (the hook streams again); clipping
    // changes them all, so step() copies them again.
    const auto transfers = streamed.last_step_transfers();
    CHECK(transfers.streamed == (step >= 5 ? 0 : 3));
    CHECK(transfers.copied_at_step == (step >= 5 ? 3 : 0));
    CHECK(plain.last_step_transfers().copied_at_step == 3);
  }
  streamed.finish_pending_update();
  plain.finish_pending_update();
  check_same(plain_params, streamed_params);
  // With an update in flight during backward nothing streams: step() copies.
  backward(streamed_params, 7);
  streamed.step();
  streamed.zero_grad();
  backward(streamed_params, 8);
  streamed.step();
  CHECK(streamed.last_step_transfers().copied_at_step == 3);
  streamed.finish_pending_update();
}
