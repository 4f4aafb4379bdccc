// tests/cuda/test_cuda_clip_grad.cpp — clip_grad_norm_ and clip_grad_value_ on a GPU: the
// total norm and the clipped gradients equal the CPU's on fresh random gradients of several
// parameters (float32 and bfloat16; norms 2, 1, 3 and inf; clipping and not), the norm
// agrees with one computed on the host in float64, and a clip never waits for the device.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda/kernel_checks.h"
#include "cuda/runtime.h"
#include "cuda/stream_hold.h"
#include "optim/clip_grad.h"

using namespace mg;
using namespace cuda_checks;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Parameters on the CPU and their copies on the GPU, each with the same random gradient:
// sizes around a reduction's block, an empty one, and one without a gradient.
struct Params {
  std::vector<Tensor> cpu, cuda;
};

Params make_params(DType dtype, uint64_t seed) {
  const std::vector<Shape> sizes = {{3}, {37, 53}, {4097}, {0}, {8, 3, 3, 3}, {1000}, {5}};
  Params params;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor param_cpu = random_values(sizes[i], dtype, seed + 2 * i);
    Tensor param_cuda = param_cpu.to(kCuda);
    param_cpu.requires_grad_();
    param_cuda.requires_grad_();
    if (i + 1 < sizes.size()) {  // the last one has no gradient
      Tensor grad = random_values(sizes[i], dtype, seed + 2 * i + 1);
      param_cpu.set_grad(grad);
      param_cuda.set_grad(grad.to(kCuda));
    }
    params.cpu.push_back(param_cpu);
    params.cuda.push_back(param_cuda);
  }
  return params;
}

// The norm of every gradient of `params` concatenated, in float64 on the host.
double host_norm(const std::vector<Tensor>& params, double norm_type) {
  double total = 0;
  for (const Tensor& param : params) {
    if (!param.grad().defined()) continue;
    for (double value : host_values(param.grad())) {
      if (std::isinf(norm_type)) {
        total = std::max(total, std::abs(value));
      } else {
        total += std::pow(std::abs(value), norm_type);
      }
    }
  }
  return std::isinf(norm_type) ? total : std::pow(total, 1.0 / norm_type);
}

}  // namespace

TEST_CASE("CUDA clip_grad_norm_ matches the CPU on random gradients", "[cuda][clip_grad]") {
  uint64_t seed = 12000;
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    // NOTE: bfloat16 partial norms round to 8 bits on either device, in whatever order
    // each sums; a few ulps apart at most.
    const double rtol = dtype == DType::Float32 ? 1e-5 : 3 * tolerance(DType::BFloat16);
    for (double norm_type : {2.0, 1.0, 3.0, kInf}) {
      Params params = make_params(dtype, seed += 100);
      const double expected_norm = host_norm(params.cpu, norm_type);
      // Below the norm (every gradient shrinks) and above it (nothing changes).
      for (double max_norm : {0.25 * expected_norm, 2 * expected_norm}) {
        const bool clips = max_norm < expected_norm;
        INFO(dtype_name(dtype) << " norm_type " << norm_type << (clips ? ", clipping" : ", not clipping"));
        Params copy = make_params(dtype, seed);  // the same values, fresh gradients
        std::vector<Tensor> grads_before;
        for (const Tensor& param : copy.cuda) {
          if (param.grad().defined()) grads_before.push_back(contiguous_copy(param.grad()));
        }
        const Tensor norm_cpu = optim::clip_grad_norm_(copy.cpu, max_norm, norm_type);
        const Tensor norm_cuda = optim::clip_grad_norm_(copy.cuda, max_norm, norm_type);
        CHECK(norm_cuda.device() == kCuda);
        REQUIRE(norm_cuda.numel() == 1);
        check_close(norm_cuda, norm_cpu, rtol, "total norm");
        CHECK(std::abs(host_values(norm_cuda)[0] - expected_norm) <= rtol * expected_norm);
        size_t with_grad = 0;
        for (size_t i = 0; i < copy.cuda.size(); ++i) {
          const Tensor grad_cuda = copy.cuda[i].grad();
          REQUIRE(grad_cuda.defined() == copy.cpu[i].grad().defined());
          if (!grad_cuda.defined()) continue;
          const std::string what = "gradient " + std::to_string(i);
          check_close(grad_cuda, copy.cpu[i].grad(), rtol, what);
          // A coefficient of exactly 1 leaves an unclipped gradient bit for bit.
          if (!clips) CHECK(host_values(grad_cuda) == host_values(grads_before[with_grad]));
          ++with_grad;
        }
        if (clips) {
          const double clipped = host_norm(copy.cuda, norm_type);
          CHECK(std::abs(clipped - max_norm) <= rtol * max_norm * 2);
        }
      }
    }
  }
}

TEST_CASE("CUDA clip_grad_value_ matches the CPU", "[cuda][clip_grad]") {
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    INFO(dtype_name(dtype));
    Params params = make_params(dtype, 13000);
    optim::clip_grad_value_(params.cpu, 0.5);
    optim::clip_grad_value_(params.cuda, 0.5);
    for (size_t i = 0; i < params.cuda.size(); ++i) {
      if (!params.cuda[i].grad().defined()) continue;
      check_equal(params.cuda[i].grad(), params.cpu[i].grad(), "gradient " + std::to_string(i));
      for (double value : host_values(params.cuda[i].grad())) CHECK(std::abs(value) <= 0.5);
    }
  }
}

TEST_CASE("CUDA clip_grad_norm_ never waits for the device", "[cuda][clip_grad]") {
  mg::cuda::Stream stream;
  mg::cuda::StreamGuard use(stream);
  // NOTE: the gradients' copies from pageable host memory wait for the stream, so they are
  // made before the hold; a first clip lets the caching allocator keep the blocks it needs.
  Params params = make_params(DType::Float32, 14000);
  Params reference = make_params(DType::Float32, 14000);
  const double max_norm = 0.5 * host_norm(params.cpu, 2.0);
  optim::clip_grad_norm_(params.cuda, 1e9);  // clips nothing
  stream.synchronize();

  Tensor norm;
  cudaError_t queued = cudaSuccess;
  bool timed_out = false;
  {
    mg_test::StreamHold hold(stream);
    norm = optim::clip_grad_norm_(params.cuda, max_norm);
    queued = cudaStreamQuery(stream.handle());
    hold.release();
    timed_out = hold.timed_out();
  }
  stream.synchronize();
  CHECK_FALSE(timed_out);              // the host never waited for the hold to end
  CHECK(queued == cudaErrorNotReady);  // the clip's kernels were still queued
  const Tensor norm_cpu = optim::clip_grad_norm_(reference.cpu, max_norm);
  check_close(norm, norm_cpu, 1e-5, "total norm");
  for (size_t i = 0; i < params.cuda.size(); ++i) {
    if (params.cuda[i].grad().defined()) {
      check_close(params.cuda[i].grad(), reference.cpu[i].grad(), 1e-5, "gradient " + std::to_string(i));
    }
  }
}
