// tests/cuda/test_cuda_offloaded_adam.cpp — optim::OffloadedAdamW on CUDA parameters against
// optim::AdamW on their copies on the same GPU: equal within float rounding over several
// steps (the device kernel may contract into FMAs, the host update does not), in float32
// and bfloat16 (against AdamW on float32 copies: the offloaded one keeps float32 masters),
// exact mode and delayed; and the optimizer holds no bytes on the device: its state is
// OPTIMIZER_STATE in pinned host memory.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cuda/kernel_checks.h"
#include "memgrad/memgrad.h"

using namespace mg;
using namespace cuda_checks;

namespace {

const Shape kSizes[] = {Shape{64, 33}, Shape{17}, Shape{300, 129}};

std::vector<Tensor> cuda_params(DType dtype, uint64_t seed) {
  std::vector<Tensor> params;
  for (const Shape& sizes : kSizes) params.push_back(random_values(sizes, dtype, seed++).to(kCuda).requires_grad_());
  return params;
}

}  // namespace

TEST_CASE("cuda OffloadedAdamW: equals AdamW on the GPU within rounding, with no optimizer bytes on the device",
          "[cuda][optim][offload]") {
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    for (bool delayed : {false, true}) {
      INFO(dtype_name(dtype) << (delayed ? " delayed" : " exact"));
      const std::vector<Tensor> params = cuda_params(dtype, 40);
      // The reference: float32 AdamW on the GPU (for bfloat16: on float32 copies, as the masters).
      std::vector<Tensor> reference_params;
      for (const Tensor& param : params) {
        reference_params.push_back(converted_copy(param.detach(), DType::Float32, kCuda).requires_grad_());
      }
      const int64_t device_state_before = memory::snapshot(kCuda).category(MemoryCategory::OptimizerState).current;
      const int64_t pinned_state_before =
          memory::pinned_host_snapshot().category(MemoryCategory::OptimizerState).current;
      optim::AdamW reference(reference_params, {.lr = 1e-2, .weight_decay = 0.05});
      optim::OffloadedAdamW offloaded(params, {.lr = 1e-2, .weight_decay = 0.05}, {.delayed_update = delayed});
      for (int step = 1; step <= 5; ++step) {
        for (size_t i = 0; i < params.size(); ++i) {
          const Tensor gradient = random_values(params[i].sizes(), dtype, 100 * step + i).to(kCuda);
          params[i].set_grad(gradient);
          reference_params[i].set_grad(converted_copy(gradient, DType::Float32, kCuda));
        }
        offloaded.step();
        reference.step();
      }
      offloaded.finish_pending_update();
      cuda::synchronize();
      for (size_t i = 0; i < params.size(); ++i) {
        const std::string what = std::string("parameter ") + std::to_string(i);
        check_close(converted_copy(offloaded.state(params[i])->master_param, DType::Float32, kCuda),
                    reference_params[i].detach(), 1e-5, what + " master");
        check_close(converted_copy(params[i].detach(), DType::Float32, kCuda),
                    converted_copy(converted_copy(reference_params[i].detach(), dtype, kCuda), DType::Float32, kCuda),
                    dtype == DType::Float32 ? 1e-5 : 1e-2, what);
        CHECK(offloaded.state(params[i])->exp_avg.is_pinned());
      }
      // The offloaded optimizer adds nothing to the device's OPTIMIZER_STATE; AdamW's moments
      // and counters are all there is. On the host: 12 bytes per element and a counter.
      int64_t elements = 0;
      for (const Tensor& param : params) elements += param.numel();
      CHECK(memory::snapshot(kCuda).category(MemoryCategory::OptimizerState).current - device_state_before ==
            reference.state_bytes());
      CHECK(memory::pinned_host_snapshot().category(MemoryCategory::OptimizerState).current - pinned_state_before ==
            12 * elements);
      CHECK(offloaded.state_bytes() == 12 * elements + 4 * static_cast<int64_t>(params.size()));
    }
  }
}

TEST_CASE("cuda OffloadedAdamW: gradients streamed during backward equal those copied at step()",
          "[cuda][optim][offload]") {
  // Real backward passes (the post-accumulate-grad hooks start each copy on the side stream
  // as the gradient is made); then, in some steps, a second micro-batch and clipping change
  // the gradients after their copies started. The streamed optimizer must end bit for bit
  // where one that copies everything at step() does: the same host arithmetic on the same
  // gradients.
  std::vector<Tensor> streamed_params = cuda_params(DType::Float32, 70);
  std::vector<Tensor> plain_params;
  for (const Tensor& param : streamed_params) plain_params.push_back(param.detach().clone().requires_grad_());
  optim::OffloadedAdamW streamed(streamed_params, {.lr = 1e-2});
  optim::OffloadedAdamW plain(plain_params, {.lr = 1e-2}, {.stream_gradients = false});
  auto backward = [](const std::vector<Tensor>& params, uint64_t seed) {
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor target = random_values(params[i].sizes(), DType::Float32, seed + i).to(kCuda);
      (params[i] - target).pow(2.0).mean().backward();
    }
  };
  for (int step = 1; step <= 6; ++step) {
    INFO("step " << step);
    for (const std::vector<Tensor>* params : {&streamed_params, &plain_params}) {
      backward(*params, 1000 * step);
      if (step >= 3) backward(*params, 1000 * step + 500);  // accumulates into the streamed gradients
      if (step >= 5) optim::clip_grad_norm_(*params, 0.5);
    }
    streamed.step();
    plain.step();
    streamed.zero_grad();
    plain.zero_grad();
    const auto transfers = streamed.last_step_transfers();
    CHECK(transfers.streamed == (step >= 5 ? 0 : 3));
    CHECK(transfers.copied_at_step == (step >= 5 ? 3 : 0));
  }
  cuda::synchronize();
  for (size_t i = 0; i < streamed_params.size(); ++i) {
    INFO("parameter " << i);
    CHECK(host_values(streamed_params[i].detach()) == host_values(plain_params[i].detach()));
  }
}
