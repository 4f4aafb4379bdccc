// tests/cuda/test_cuda_grad_scaler.cpp — GradScaler on a GPU: the device-independent checks
// of tests/amp/grad_scaler_checks.h (scaled steps match plain ones, an overflow skips the
// step and halves the scale, growth), the unscale and update kernels against the CPU ones,
// and a scaled step that never waits for the device.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <vector>

#include "memgrad/amp/grad_scaler.h"
#include "amp/grad_scaler_checks.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/random.h"
#include "memgrad/cuda/runtime.h"
#include "cuda/stream_hold.h"
#include "memgrad/optim/optim.h"

using namespace mg;
using mg_test::host_values;

TEST_CASE("CUDA GradScaler: scaled steps match unscaled ones (SGD, Adam, Adagrad)", "[cuda][amp]") {
  mg_test::check_scaled_steps_match_plain_steps(Device::cuda());
}

TEST_CASE("CUDA GradScaler: an inf or NaN gradient skips the step and halves the scale", "[cuda][amp]") {
  mg_test::check_overflow_skips_the_step(Device::cuda());
}

TEST_CASE("CUDA GradScaler: the scale grows after growth_interval clean steps", "[cuda][amp]") {
  mg_test::check_scale_growth(Device::cuda());
}

TEST_CASE("CUDA non_finite_check_and_unscale matches the CPU kernel on many tensors", "[cuda][amp]") {
  // Sizes around the chunk (4096 elements), an empty tensor, and 2400 small ones: 2405
  // non-empty tensors. One launch of the unscale's single list takes 1160 tensors
  // (cuda/kernels/multi_tensor_apply.cuh: CUDA 12.1's 32,764 bytes of kernel arguments), so
  // this takes three launches, the last one partial.
  std::vector<Shape> sizes = {{1}, {4096}, {4097}, {0}, {70001}, {37, 53}};
  for (int i = 0; i < 2400; ++i) sizes.push_back({i % 7 + 1, 5});
  const int last = static_cast<int>(sizes.size()) - 1;
  Generator generator(31);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (int poisoned : {-1, 2, last}) {  // no inf, an inf in a large tensor, one in the third launch
      INFO(dtype_name(dtype) << ", inf in tensor " << poisoned);
      std::vector<Tensor> grads_cpu, grads_cuda;
      for (size_t i = 0; i < sizes.size(); ++i) {
        Tensor grad = (randn(sizes[i], {}, &generator) * 1000.0).to(dtype);
        if (static_cast<int>(i) == poisoned) grad.view({-1}).narrow(0, 0, 1).fill_(std::numeric_limits<double>::infinity());
        grads_cpu.push_back(grad);
        grads_cuda.push_back(grad.to(Device::cuda()));
      }
      const Tensor found_cpu = zeros({}), found_cuda = zeros({}, {.device = Device::cuda()});
      const Tensor inverse_cpu = full({}, 1.0 / 1024), inverse_cuda = full({}, 1.0 / 1024, {.device = Device::cuda()});
      kernels(Device::cpu()).non_finite_check_and_unscale(grads_cpu, found_cpu, inverse_cpu);
      kernels(Device::cuda()).non_finite_check_and_unscale(grads_cuda, found_cuda, inverse_cuda);
      CHECK(found_cuda.to(Device::cpu()).item<float>() == (poisoned >= 0 ? 1.0f : 0.0f));
      CHECK(found_cpu.item<float>() == found_cuda.to(Device::cpu()).item<float>());
      for (size_t i = 0; i < sizes.size(); ++i) {
        INFO("tensor " << i);
        CHECK(host_values(grads_cuda[i]) == host_values(grads_cpu[i]));  // a power of two: exact
      }
    }
  }
}

TEST_CASE("CUDA update_scale matches the CPU kernel", "[cuda][amp]") {
  const Tensor scale_cpu = full({}, 1000.0), scale_cuda = full({}, 1000.0, {.device = Device::cuda()});
  const Tensor tracker_cpu = zeros({}, {.dtype = DType::Int32});
  const Tensor tracker_cuda = zeros({}, {.dtype = DType::Int32, .device = Device::cuda()});
  for (float found : {0.f, 0.f, 0.f, 1.f, 0.f, 0.f, 2.f, 0.f, 0.f, 0.f, 0.f}) {
    const Tensor found_cpu = full({}, found), found_cuda = full({}, found, {.device = Device::cuda()});
    kernels(Device::cpu()).update_scale(scale_cpu, tracker_cpu, found_cpu, 3.0, 0.25, 3);
    kernels(Device::cuda()).update_scale(scale_cuda, tracker_cuda, found_cuda, 3.0, 0.25, 3);
    CHECK(scale_cuda.to(Device::cpu()).item<float>() == scale_cpu.item<float>());
    CHECK(tracker_cuda.to(Device::cpu()).item<int32_t>() == tracker_cpu.item<int32_t>());
  }
  CHECK(scale_cpu.item<float>() == 1000.0f * 3 * 0.25f * 0.25f * 3);
}

TEST_CASE("CUDA GradScaler: a scaled step never waits for the device", "[cuda][amp][host-sync]") {
  mg::cuda::Stream stream;
  mg::cuda::StreamGuard use(stream);
  std::vector<Tensor> params = mg_test::make_params(Device::cuda());
  optim::Adam optimizer(params, {.lr = 0.01});
  amp::GradScaler scaler({.init_scale = 1024, .growth_interval = 1});
  // A first step creates the optimizer's state and the scaler's tensors.
  mg_test::scaled_backward(scaler, params, 0);
  scaler.step(optimizer);
  scaler.update();
  stream.synchronize();

  for (bool overflow : {false, true}) {
    INFO((overflow ? "a step with an inf gradient" : "a clean step"));
    optimizer.zero_grad();
    // NOTE: the batch's copy from pageable host memory waits for the stream, so the loss is
    // computed before the hold; everything from scale() to update() runs under it.
    const Tensor loss = mg_test::loss_of(params, 1);
    const auto before = mg_test::snapshot(optimizer);
    cudaError_t queued = cudaSuccess;
    bool timed_out = false;
    {
      mg_test::StreamHold hold(stream);
      scaler.scale(loss).backward();
      if (overflow) mg_test::poison_gradient(params, std::numeric_limits<float>::infinity());
      scaler.unscale_(optimizer);
      scaler.step(optimizer);
      scaler.update();
      queued = cudaStreamQuery(stream.handle());
      hold.release();
      timed_out = hold.timed_out();
    }
    stream.synchronize();
    CHECK_FALSE(timed_out);             // the host never waited for the hold to end
    CHECK(queued == cudaErrorNotReady);  // the step's kernels were still queued
    CHECK(scaler.get_scale() == (overflow ? 2048.0 : 4096.0));  // 2048 after the first step
    CHECK((mg_test::snapshot(optimizer) == before) == overflow);
  }
}
