// tests/core/test_host_adam.cpp — the host Adam/AdamW of core/cpu/host_adam.h: every vector
// path this CPU runs equals the scalar path bit for bit, and the scalar path equals the
// CPU Adam kernel (core/cpu/optimizer_kernels.cpp, optimizer_formulas.h's adam_element),
// over random values of many magnitudes, for each gradient dtype, with and without amsgrad,
// with decoupled (AdamW) and L2 (Adam) decay, and with the 16-bit copy of the result.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "memgrad/core/cpu/host_adam.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/half.h"
#include "memgrad/core/kernels.h"

using namespace mg;
using cpu::HostAdamPath;

namespace {

// More than two of the kernel's chunks (16384), and no multiple of 8 or 16: every path
// runs vector bodies, OpenMP's split and a scalar tail.
constexpr int64_t kCount = 2 * 16384 + 1037;

// Values spread over 2^-30 .. 2^4 with random signs, as gradients and weights are.
std::vector<float> random_values(std::mt19937& engine, bool non_negative = false) {
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-30, 4);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(kCount);
  for (float& value : values) {
    value = std::ldexp(mantissa(engine), exponent(engine));
    if (!non_negative && negative(engine)) value = -value;
  }
  values[3] = 0.0f;
  return values;
}

std::vector<uint16_t> to_16_bits(const std::vector<float>& values, DType dtype) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bits[i] = dtype == DType::Float16 ? Half::from_float(values[i]) : BFloat16::from_float(values[i]);
  }
  return bits;
}

float from_16_bits(uint16_t bits, DType dtype) {
  return dtype == DType::Float16 ? Half::to_float(bits) : std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// One update's inputs and, after run(), its outputs.
struct Case {
  std::vector<float> param, exp_avg, exp_avg_sq, max_exp_avg_sq, grad32;
  std::vector<uint16_t> grad16, param_out16;
  std::vector<float> param_out32;

  Case(uint32_t seed, DType grad_dtype) {
    std::mt19937 engine(seed);
    param = random_values(engine);
    exp_avg = random_values(engine);
    exp_avg_sq = random_values(engine, /*non_negative=*/true);
    max_exp_avg_sq = random_values(engine, /*non_negative=*/true);
    grad32 = random_values(engine);
    if (grad_dtype != DType::Float32) {
      grad16 = to_16_bits(grad32, grad_dtype);
      for (int64_t i = 0; i < kCount; ++i) grad32[i] = from_16_bits(grad16[i], grad_dtype);
    }
    param_out16.assign(kCount, 0);
    param_out32.assign(kCount, 0.0f);
  }

  void run(DType grad_dtype, DType out_dtype, bool amsgrad, const AdamHyper& hyper, double step, HostAdamPath path) {
    cpu::HostAdamArrays arrays{.master_param = param.data(),
                               .exp_avg = exp_avg.data(),
                               .exp_avg_sq = exp_avg_sq.data(),
                               .max_exp_avg_sq = amsgrad ? max_exp_avg_sq.data() : nullptr,
                               .grad = grad_dtype == DType::Float32 ? static_cast<const void*>(grad32.data())
                                                                    : static_cast<const void*>(grad16.data()),
                               .grad_dtype = grad_dtype,
                               .param_out = out_dtype == DType::Float32 ? static_cast<void*>(param_out32.data())
                                                                        : static_cast<void*>(param_out16.data()),
                               .param_out_dtype = out_dtype,
                               .count = kCount};
    cpu::host_adam_update(arrays, cpu::adam_coefficients<float>(hyper, step), path);
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

AdamHyper hyper_for(bool decoupled, bool amsgrad) {
  return {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.05,
          .decoupled_weight_decay = decoupled, .amsgrad = amsgrad};
}

Tensor tensor_of(const std::vector<float>& values) { return from_vector(values, {kCount}); }

}  // namespace

TEST_CASE("host_adam: each vector path equals the scalar path bit for bit", "[optim][offload]") {
  std::vector<HostAdamPath> paths = {HostAdamPath::Avx2, HostAdamPath::Avx512};
  std::erase_if(paths, [](HostAdamPath path) { return !cpu::host_adam_path_available(path); });
  if (paths.empty()) WARN("this CPU has neither AVX2 nor AVX-512F: only the scalar path ran");
  uint32_t seed = 1;
  for (HostAdamPath path : paths) {
    for (DType grad_dtype : {DType::Float32, DType::Float16, DType::BFloat16}) {
      for (DType out_dtype : {DType::Float32, DType::Float16, DType::BFloat16}) {
        for (bool amsgrad : {false, true}) {
          for (bool decoupled : {true, false}) {
            INFO(cpu::host_adam_path_name(path) << " grad " << grad_dtype << " out " << out_dtype << " amsgrad "
                                                << amsgrad << " decoupled " << decoupled);
            Case scalar(++seed, grad_dtype), vector = scalar;
            const AdamHyper hyper = hyper_for(decoupled, amsgrad);
            for (double step : {1.0, 2.0, 7.0}) {
              scalar.run(grad_dtype, out_dtype, amsgrad, hyper, step, HostAdamPath::Scalar);
              vector.run(grad_dtype, out_dtype, amsgrad, hyper, step, path);
            }
            CHECK(same_bits(vector.param, scalar.param));
            CHECK(same_bits(vector.exp_avg, scalar.exp_avg));
            CHECK(same_bits(vector.exp_avg_sq, scalar.exp_avg_sq));
            CHECK(same_bits(vector.max_exp_avg_sq, scalar.max_exp_avg_sq));
            CHECK(same_bits(vector.param_out32, scalar.param_out32));
            CHECK(vector.param_out16 == scalar.param_out16);
          }
        }
      }
    }
  }
}

TEST_CASE("host_adam: equals the CPU Adam kernel bit for bit, and rounds its copy as half.h", "[optim][offload]") {
  for (DType grad_dtype : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (bool amsgrad : {false, true}) {
      for (bool decoupled : {true, false}) {
        INFO("grad " << grad_dtype << " amsgrad " << amsgrad << " decoupled " << decoupled);
        Case host(11, grad_dtype);
        // The kernel's float32 tensors, from the same values (16-bit gradients widened).
        const Tensor param = tensor_of(host.param), grad = tensor_of(host.grad32);
        const Tensor exp_avg = tensor_of(host.exp_avg), exp_avg_sq = tensor_of(host.exp_avg_sq);
        const Tensor max_exp_avg_sq = amsgrad ? tensor_of(host.max_exp_avg_sq) : Tensor();
        const Tensor step = zeros({});
        const AdamHyper hyper = hyper_for(decoupled, amsgrad);
        const DType out_dtype = grad_dtype == DType::Float32 ? DType::BFloat16 : grad_dtype;
        for (double step_count : {1.0, 2.0, 3.0}) {
          host.run(grad_dtype, out_dtype, amsgrad, hyper, step_count, cpu::best_host_adam_path());
          std::vector<Tensor> max_list;
          if (amsgrad) max_list.push_back(max_exp_avg_sq);
          kernels(Device::cpu()).adam_step({&param, 1}, {&grad, 1}, {&exp_avg, 1}, {&exp_avg_sq, 1}, max_list,
                                           {&step, 1}, hyper);
        }
        CHECK(same_bits(host.param, param.to_vector<float>()));
        CHECK(same_bits(host.exp_avg, exp_avg.to_vector<float>()));
        CHECK(same_bits(host.exp_avg_sq, exp_avg_sq.to_vector<float>()));
        if (amsgrad) CHECK(same_bits(host.max_exp_avg_sq, max_exp_avg_sq.to_vector<float>()));
        CHECK(host.param_out16 == to_16_bits(host.param, out_dtype));
      }
    }
  }
}

TEST_CASE("host_adam: the 16-bit copy keeps half.h's NaN, infinity and subnormal rounding", "[optim][offload]") {
  // lr 0 and no decay: the update keeps the parameters (but for -0's sign), these values.
  const AdamHyper hyper{.lr = 0.0, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0,
                        .decoupled_weight_decay = true, .amsgrad = false};
  std::vector<float> special = {std::nanf(""), -std::nanf(""), 65520.0f, 65519.0f, -1e9f, 3e-8f, 2.9802322e-8f,
                                5.9604645e-8f * 1.5f, 1e-40f, -0.0f, 3.3895314e38f, 1.0f + 1.0f / 256.0f};
  for (DType out_dtype : {DType::Float16, DType::BFloat16}) {
    Case values(5, DType::Float32);
    for (int64_t i = 0; i < kCount; ++i) values.param[i] = special[i % special.size()];
    values.run(DType::Float32, out_dtype, false, hyper, 1.0, cpu::best_host_adam_path());
    CHECK(std::isnan(values.param[0]));
    CHECK(values.param[2] == 65520.0f);
    CHECK(values.param_out16 == to_16_bits(values.param, out_dtype));
  }
}
