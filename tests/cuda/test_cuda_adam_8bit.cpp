// tests/cuda/test_cuda_adam_8bit.cpp — the CUDA adam_8bit_step against the CPU kernel, one
// step at a time from the same state, on fresh random values: parameters within float
// tolerance, absmaxes within float32 rounding, codes equal or (at a rounding tie) one apart,
// so the dequantised moments agree within one map step. Then AdamW8bit's skip on the
// device (found_inf) and its learning rate on the device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/kernel_checks.h"
#include "memgrad/core/quantize_8bit.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/memgrad.h"

using namespace mg;
using namespace cuda_checks;

namespace {

// One parameter's tensors for adam_8bit_step on one device.
struct EightBitTensors {
  Tensor param, exp_avg_codes, exp_avg_sq_codes, exp_avg_absmax, exp_avg_sq_absmax, step;
};

EightBitTensors to_device(const EightBitTensors& host, Device device) {
  return {host.param.to(device),          host.exp_avg_codes.to(device),      host.exp_avg_sq_codes.to(device),
          host.exp_avg_absmax.to(device), host.exp_avg_sq_absmax.to(device), host.step.to(device)};
}

// Codes equal, or one apart at a tie; the dequantised values then differ by one step of
// the map times absmax. Returns how many codes differ.
int64_t check_moment(const Tensor& cuda_codes, const Tensor& cuda_absmax, const Tensor& cpu_codes,
                     const Tensor& cpu_absmax, const quantize_8bit::QuantizationMap& map, int64_t block_size,
                     const std::string& what) {
  INFO(what);
  const std::vector<uint8_t> got = cuda_codes.to(Device::cpu()).to_vector<uint8_t>();
  const std::vector<uint8_t> expected = cpu_codes.to_vector<uint8_t>();
  const std::vector<float> got_absmax = cuda_absmax.to(Device::cpu()).to_vector<float>();
  const std::vector<float> expected_absmax = cpu_absmax.to_vector<float>();
  for (size_t block = 0; block < expected_absmax.size(); ++block) {
    INFO("block " << block);
    REQUIRE(got_absmax[block] == Approx(expected_absmax[block]).epsilon(1e-5).margin(1e-30));
  }
  int64_t differing = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (got[i] == expected[i]) continue;
    ++differing;
    INFO("element " << i << ": cuda code " << int(got[i]) << ", cpu code " << int(expected[i]));
    REQUIRE(std::abs(int(got[i]) - int(expected[i])) == 1);
    const size_t block = i / static_cast<size_t>(block_size);
    const int low = std::min(got[i], expected[i]);
    const double one_step = (double(map.values[low + 1]) - map.values[low]) * expected_absmax[block];
    const double difference = std::fabs(double(map.values[got[i]]) * got_absmax[block] -
                                         double(map.values[expected[i]]) * expected_absmax[block]);
    REQUIRE(difference <= one_step * (1 + 1e-5));
  }
  return differing;
}

}  // namespace

TEST_CASE("CUDA adam_8bit_step matches the CPU kernel step by step", "[cuda][adam_8bit]") {
  const auto [dtype, block_size] = GENERATE(table<DType, int64_t>({
      {DType::Float32, 2048},
      {DType::Float32, 64},
      {DType::Float64, 256},
      {DType::BFloat16, 2048},
      {DType::Float16, 4096},
  }));
  // Blocks cut short, an empty tensor, a matrix, one larger than many blocks.
  const std::vector<Shape> sizes = {{5000}, {0}, {64, 33}, {1}, {300001}};
  const AdamHyper hyper{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.05,
                        .decoupled_weight_decay = true, .amsgrad = false};
  INFO(dtype_name(dtype) << ", block_size " << block_size);
  std::vector<EightBitTensors> cpu;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t blocks = quantize_8bit::block_count(sizes[i].numel(), block_size);
    cpu.push_back({random_values(sizes[i], dtype, 100 + i),
                   full(sizes[i], quantize_8bit::zero_code(quantize_8bit::kSignedMap), {.dtype = DType::UInt8}),
                   zeros(sizes[i], {.dtype = DType::UInt8}), zeros({blocks}), zeros({blocks}), zeros({})});
  }
  int64_t differing = 0, elements = 0;
  for (int step = 0; step < 3; ++step) {
    // Both devices start the step from the CPU's state.
    std::vector<EightBitTensors> gpu;
    std::vector<Tensor> grads_cpu, grads_gpu;
    for (size_t i = 0; i < sizes.size(); ++i) {
      gpu.push_back(to_device(cpu[i], kCuda));
      grads_cpu.push_back(random_values(sizes[i], dtype, 1000 * (step + 1) + i) * 0.1);
      grads_gpu.push_back(grads_cpu.back().to(kCuda));
    }
    auto lists = [](const std::vector<EightBitTensors>& tensors, Tensor EightBitTensors::*member) {
      std::vector<Tensor> list;
      for (const EightBitTensors& entry : tensors) list.push_back(entry.*member);
      return list;
    };
    using T = EightBitTensors;
    cpu_kernels().adam_8bit_step(lists(cpu, &T::param), grads_cpu, lists(cpu, &T::exp_avg_codes),
                                 lists(cpu, &T::exp_avg_sq_codes), lists(cpu, &T::exp_avg_absmax),
                                 lists(cpu, &T::exp_avg_sq_absmax), lists(cpu, &T::step), hyper, block_size);
    cuda::adam_8bit_step(lists(gpu, &T::param), grads_gpu, lists(gpu, &T::exp_avg_codes),
                         lists(gpu, &T::exp_avg_sq_codes), lists(gpu, &T::exp_avg_absmax),
                         lists(gpu, &T::exp_avg_sq_absmax), lists(gpu, &T::step), hyper, block_size);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const std::string what = "step " + std::to_string(step + 1) + ", tensor " + std::to_string(i) + " " +
                               sizes[i].str();
      CHECK(gpu[i].step.item<float>() == float(step + 1));
      // NOTE: as adam_step's test says, lr * m / (sqrt(v) + eps) is ill-conditioned where
      // |grad| is near eps; 1e-5 covers it in float32.
      check_close(gpu[i].param, cpu[i].param, dtype == DType::Float32 ? 1e-5 : tolerance(dtype), what + " param");
      differing += check_moment(gpu[i].exp_avg_codes, gpu[i].exp_avg_absmax, cpu[i].exp_avg_codes,
                                cpu[i].exp_avg_absmax, quantize_8bit::kSignedMap, block_size, what + " exp_avg");
      differing += check_moment(gpu[i].exp_avg_sq_codes, gpu[i].exp_avg_sq_absmax, cpu[i].exp_avg_sq_codes,
                                cpu[i].exp_avg_sq_absmax, quantize_8bit::kUnsignedMap, block_size,
                                what + " exp_avg_sq");
      elements += 2 * sizes[i].numel();
    }
  }
  INFO(differing << " of " << elements << " codes differ by one");
  CHECK(differing <= elements / 1000);
}

TEST_CASE("CUDA AdamW8bit skips on the device where found_inf is set, and reads lr there", "[cuda][adam_8bit]") {
  Tensor param = random_values({3, 4096}, DType::Float32, 5).to(kCuda).requires_grad_();
  Tensor small = random_values({100}, DType::Float32, 6).to(kCuda).requires_grad_();  // 32-bit state
  optim::AdamW8bit optimizer({param, small}, {.lr = 0.1, .block_size = 256});
  const Tensor clear = zeros({}, {.device = kCuda}), set = full({}, 1.0, {.device = kCuda});
  param.set_grad(random_values({3, 4096}, DType::Float32, 7).to(kCuda));
  small.set_grad(random_values({100}, DType::Float32, 8).to(kCuda));
  optimizer.step_skipping_if(clear);
  const std::vector<float> after_first = param.to(Device::cpu()).to_vector<float>();
  const optim::ParamState& state = *optimizer.state(param);
  const std::vector<uint8_t> codes = state.exp_avg.to(Device::cpu()).to_vector<uint8_t>();
  const std::vector<float> absmax = state.exp_avg_sq_absmax.to(Device::cpu()).to_vector<float>();
  optimizer.step_skipping_if(set);
  CHECK(param.to(Device::cpu()).to_vector<float>() == after_first);
  CHECK(state.exp_avg.to(Device::cpu()).to_vector<uint8_t>() == codes);
  CHECK(state.exp_avg_sq_absmax.to(Device::cpu()).to_vector<float>() == absmax);
  CHECK(state.step.item<float>() == 1.0f);
  CHECK(optimizer.state(small)->step.item<float>() == 1.0f);

  // lr 0 in the hyper-parameters, 0.5 on the device: only the tensor can move the parameter
  // (Adam's first step moves each element by lr, against its gradient's sign).
  const Tensor rate = full({}, 0.5, {.dtype = DType::Float64, .device = kCuda});
  Tensor p = full({4096}, 1.0, {.device = kCuda}), g = full({4096}, -1.0, {.device = kCuda});
  Tensor m = zeros({4096}, {.dtype = DType::UInt8, .device = kCuda});
  Tensor v = zeros({4096}, {.dtype = DType::UInt8, .device = kCuda});
  Tensor m_absmax = zeros({2}, {.device = kCuda}), v_absmax = zeros({2}, {.device = kCuda});
  Tensor counter = zeros({}, {.device = kCuda});
  cuda::adam_8bit_step({&p, 1}, {&g, 1}, {&m, 1}, {&v, 1}, {&m_absmax, 1}, {&v_absmax, 1}, {&counter, 1},
                       {.lr = 0, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0,
                        .decoupled_weight_decay = true, .amsgrad = false, .lr_on_device = &rate},
                       2048);
  CHECK(p.to(Device::cpu()).to_vector<float>()[4095] == Approx(1.5));
}
