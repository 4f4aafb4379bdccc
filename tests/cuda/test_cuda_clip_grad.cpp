// tests/cuda/test_cuda_clip_grad.cpp — clip_grad_norm_ and clip_grad_value_ on a GPU: the
// total norm and the clipped gradients equal the CPU's on fresh random gradients of several
// parameters (float32 and bfloat16; norms 2, 1, 3 and inf; clipping and not), the norm
// agrees with one computed on the host in float64, and a clip never waits for the device.
// Its two kernels against the CPU's: total_norm_power on mixed-dtype lists (more tensors
// than a launch holds, any number of partials, past 2^24 elements, NaN), the same bits on
// every run; the unscale kernel as a plain scale of a mixed list.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "memgrad/core/kernels.h"
#include "cuda/kernel_checks.h"
#include "memgrad/cuda/runtime.h"
#include "cuda/stream_hold.h"
#include "memgrad/optim/clip_grad.h"

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

TEST_CASE("CUDA clip_grad_norm_ never waits for the device", "[cuda][clip_grad][host-sync]") {
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

namespace {

// Fresh random tensors of the given dtypes, in turn, with the given sizes, on the CPU.
std::vector<Tensor> random_list(const std::vector<Shape>& sizes, const std::vector<DType>& dtypes, uint64_t seed) {
  std::vector<Tensor> list;
  for (size_t i = 0; i < sizes.size(); ++i) list.push_back(random_values(sizes[i], dtypes[i % dtypes.size()], seed + i));
  return list;
}

std::vector<Tensor> on_cuda(const std::vector<Tensor>& list) {
  std::vector<Tensor> copies;
  for (const Tensor& tensor : list) copies.push_back(tensor.to(kCuda));
  return copies;
}

// total_norm_power of `list` on `device` (copied there) with `slots` partials.
Tensor norm_power(const std::vector<Tensor>& list, Device device, double p, int64_t slots) {
  bool any_float64 = false;
  for (const Tensor& tensor : list) any_float64 = any_float64 || tensor.dtype() == DType::Float64;
  const TensorOptions options{.dtype = any_float64 ? DType::Float64 : DType::Float32, .device = device};
  const Tensor partials = empty({slots}, options);
  const Tensor result = empty({}, options);
  kernels(device).total_norm_power(device.is_cpu() ? list : on_cuda(list), p, partials, result);
  return result;
}

}  // namespace

TEST_CASE("CUDA total_norm_power matches the CPU kernel on mixed lists, the same bits every run", "[cuda][clip_grad]") {
  // Sizes around the chunk (4096 elements) and empty ones; then 3000 small tensors, which
  // take three launches of 1160 (multi_tensor_apply.cuh) per dtype.
  std::vector<Shape> around_chunk = {{1}, {4095}, {0}, {4096}, {4097}, {70001}, {37, 53}, {2, 0}};
  std::vector<Shape> many;
  for (int i = 0; i < 3000; ++i) many.push_back({i % 7 + 1, 3});
  const std::vector<DType> mixed16 = {DType::Float32, DType::BFloat16, DType::Float16};
  const std::vector<DType> with64 = {DType::Float32, DType::Float64, DType::BFloat16};
  struct Case {
    const char* name;
    const std::vector<Shape>& sizes;
    const std::vector<DType>& dtypes;
  };
  uint64_t seed = 15000;
  for (const Case& list_case : {Case{"around a chunk, 16-bit mixed", around_chunk, mixed16},
                                Case{"around a chunk, with float64", around_chunk, with64},
                                Case{"3000 tensors, 16-bit mixed", many, mixed16}}) {
    const std::vector<Tensor> list = random_list(list_case.sizes, list_case.dtypes, seed += 5000);
    const bool float64 = &list_case.dtypes == &with64;
    for (double p : {1.0, 2.0, 3.0, kInf}) {
      // One partial (every block's work in one slot), a few, and clip_grad_norm_'s 1024.
      for (int64_t slots : {1, 7, 1024}) {
        INFO(list_case.name << ", p " << p << ", " << slots << " partials");
        const Tensor expected = norm_power(list, Device::cpu(), p, slots);
        const Tensor first = norm_power(list, kCuda, p, slots);
        check_close(first, expected, float64 ? 1e-12 : 1e-5, "total norm power");
        check_equal(norm_power(list, kCuda, p, slots), first, "a second run");
      }
    }
  }
}

TEST_CASE("CUDA total_norm_power past float32's exact integers, and with NaN", "[cuda][clip_grad]") {
  const int64_t count = (int64_t{1} << 24) + 4099;
  const std::vector<Tensor> ones_list = {ones({count}), ones({5}, {.dtype = DType::BFloat16})};
  for (double p : {1.0, 2.0, kInf}) {
    INFO("ones, p " << p);
    const double expected = p == kInf ? 1.0 : static_cast<double>(count + 5);
    CHECK(host_values(norm_power(ones_list, kCuda, p, 1024))[0] == static_cast<double>(static_cast<float>(expected)));
  }
  const std::vector<Tensor> large = {random_values({count}, DType::Float32, 16000),
                                     random_values({3}, DType::BFloat16, 16001)};
  for (double p : {1.0, 2.0, 3.0, kInf}) {
    INFO("random, p " << p);
    check_close(norm_power(large, kCuda, p, 1024), norm_power(large, Device::cpu(), p, 1024), 1e-5, "total");
  }
  std::vector<Tensor> with_nan = random_list({{5000}, {3}, {9000}}, {DType::Float32, DType::BFloat16}, 16100);
  with_nan[2].view({-1}).narrow(0, 4321, 1).fill_(std::nan(""));
  for (double p : {1.0, 2.0, 3.0, kInf}) {
    INFO("NaN, p " << p);
    CHECK(std::isnan(host_values(norm_power(with_nan, kCuda, p, 1024))[0]));
  }
}

TEST_CASE("CUDA unscale without found_inf scales a mixed list as the CPU does", "[cuda][clip_grad]") {
  std::vector<Shape> sizes = {{1}, {4097}, {0}, {70001}, {37, 53}};
  for (int i = 0; i < 1500; ++i) sizes.push_back({i % 5 + 1});
  for (DType factor_dtype : {DType::Float32, DType::Float64}) {
    INFO("factor " << dtype_name(factor_dtype));
    const std::vector<Tensor> cpu =
        random_list(sizes, {DType::Float32, DType::BFloat16, DType::Float64, DType::Float16}, 17000);
    const std::vector<Tensor> cuda = on_cuda(cpu);
    const Tensor factor_cpu = full({}, 0.3, {.dtype = factor_dtype});
    kernels(Device::cpu()).non_finite_check_and_unscale(cpu, Tensor(), factor_cpu);
    kernels(kCuda).non_finite_check_and_unscale(cuda, Tensor(), factor_cpu.to(kCuda));
    for (size_t i = 0; i < cpu.size(); ++i) {
      // The same product in the same compute type, rounded once.
      check_close(cuda[i], cpu[i], 1e-15, "tensor " + std::to_string(i) + " " + dtype_name(cpu[i].dtype()));
    }
  }
}

TEST_CASE("CUDA clip_grad_norm_ over mixed dtypes, many tensors and a non-dense gradient matches the CPU",
          "[cuda][clip_grad]") {
  const std::vector<DType> dtypes = {DType::Float32, DType::BFloat16, DType::Float16};
  std::vector<Shape> sizes = {{4097}, {70001}, {0}, {37, 53}};
  for (int i = 0; i < 1500; ++i) sizes.push_back({i % 5 + 1});
  for (double norm_type : {1.0, 2.0, 3.0, kInf}) {
    INFO("norm_type " << norm_type);
    const std::vector<Tensor> grads = random_list(sizes, dtypes, 18000);
    Params params;
    for (const Tensor& grad : grads) {
      Tensor param_cpu = zeros_like(grad);
      Tensor param_cuda = param_cpu.to(kCuda);
      param_cpu.requires_grad_();
      param_cuda.requires_grad_();
      param_cpu.set_grad(contiguous_copy(grad));
      param_cuda.set_grad(grad.to(kCuda));
      params.cpu.push_back(param_cpu);
      params.cuda.push_back(param_cuda);
    }
    // A transposed gradient: clipped through a dense copy written back.
    const Tensor base = random_values({53, 37}, DType::Float32, 18500);
    params.cpu[3].set_grad(contiguous_copy(base).t());
    params.cuda[3].set_grad(base.to(kCuda).t());
    const Tensor transposed = params.cuda[3].grad();

    const double max_norm = 0.25 * host_norm(params.cpu, norm_type);
    const Tensor norm_cpu = optim::clip_grad_norm_(params.cpu, max_norm, norm_type);
    const Tensor norm_cuda = optim::clip_grad_norm_(params.cuda, max_norm, norm_type);
    CHECK(norm_cuda.dtype() == DType::Float32);
    check_close(norm_cuda, norm_cpu, 1e-5, "total norm");
    CHECK(params.cuda[3].grad().is_same(transposed));
    for (size_t i = 0; i < params.cuda.size(); ++i) {
      const Tensor& grad = params.cuda[i].grad();
      // The coefficients may differ in float32's last place: a gradient's last place at most.
      check_close(grad, params.cpu[i].grad(), tolerance(grad.dtype()), "gradient " + std::to_string(i));
    }
  }
}
