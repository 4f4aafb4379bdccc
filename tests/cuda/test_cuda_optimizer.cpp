// tests/cuda/test_cuda_optimizer.cpp — the fused CUDA optimizer kernels (SGD, Adam/AdamW,
// Adagrad; one parameter and multi-tensor) against the CPU's updates, parameters and state,
// on fresh random values, in row-major and channels_last layouts.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cuda/kernel_checks.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/memgrad.h"

using namespace mg;
using namespace cuda_checks;

// ---------------------------------------------------------------------------------------
// optimizers
// ---------------------------------------------------------------------------------------

namespace {

void check_state(const optim::ParamState* cuda_state, const optim::ParamState* cpu_state, double rtol,
                 const std::string& what) {
  REQUIRE((cuda_state == nullptr) == (cpu_state == nullptr));
  if (cpu_state == nullptr) return;  // a stateless update (SGD without momentum)
  auto check = [&](const Tensor& cuda_tensor, const Tensor& cpu_tensor, const char* name) {
    REQUIRE(cuda_tensor.defined() == cpu_tensor.defined());
    if (cpu_tensor.defined()) check_close(cuda_tensor, cpu_tensor, rtol, what + " " + name);
  };
  check(cuda_state->step, cpu_state->step, "step");
  check(cuda_state->momentum_buffer, cpu_state->momentum_buffer, "momentum_buffer");
  check(cuda_state->exp_avg, cpu_state->exp_avg, "exp_avg");
  check(cuda_state->exp_avg_sq, cpu_state->exp_avg_sq, "exp_avg_sq");
  check(cuda_state->max_exp_avg_sq, cpu_state->max_exp_avg_sq, "max_exp_avg_sq");
  check(cuda_state->sum, cpu_state->sum, "sum");
}

// Three steps of the same optimizer on a CPU parameter and its CUDA copy, with the same
// fresh random gradients; parameters and state must agree.
template <class Optimizer, class Options>
void check_optimizer(const std::string& name, const Options& options, DType dtype, const Shape& sizes, uint64_t seed,
                     MemoryFormat format = MemoryFormat::Contiguous) {
  Tensor param_cpu = contiguous_copy(random_values(sizes, dtype, seed), format);
  Tensor param_cuda = contiguous_copy(param_cpu.to(kCuda), format);
  param_cpu.requires_grad_();
  param_cuda.requires_grad_();
  Optimizer optimizer_cpu({param_cpu}, options);
  Optimizer optimizer_cuda({param_cuda}, options);
  for (int step = 0; step < 3; ++step) {
    Tensor gradient = contiguous_copy(random_values(sizes, dtype, seed + 1 + step), format);
    param_cpu.set_grad(gradient);
    param_cuda.set_grad(contiguous_copy(gradient.to(kCuda), format));
    optimizer_cpu.step();
    optimizer_cuda.step();
  }
  std::string what = name + " " + dtype_name(dtype) + " " + sizes.str();
  double rtol = dtype == DType::Float64 ? 1e-12 : 1e-6;
  check_close(param_cuda.detach(), param_cpu.detach(), rtol, what + " param");
  check_state(optimizer_cuda.state(param_cuda), optimizer_cpu.state(param_cpu), rtol, what);
  const optim::ParamState* state = optimizer_cuda.state(param_cuda);
  if (state != nullptr && state->step.defined()) CHECK(state->step.template item<float>() == 3.0f);
}

}  // namespace

TEST_CASE("CUDA optimizer steps update channels_last parameters as the CPU does", "[cuda]") {
  // A channels_last conv weight, and a 1x1 one (dense in both layouts at once).
  uint64_t seed = 7500;
  for (const Shape& sizes : {Shape{8, 3, 3, 3}, Shape{16, 4, 1, 1}}) {
    auto format = MemoryFormat::ChannelsLast;
    check_optimizer<optim::SGD>("sgd momentum channels_last", optim::SGDOptions{.lr = 0.1, .momentum = 0.9},
                                DType::Float32, sizes, seed += 10, format);
    check_optimizer<optim::Adam>("adam channels_last", optim::AdamOptions{.lr = 0.01}, DType::Float32, sizes,
                                 seed += 10, format);
    check_optimizer<optim::Adagrad>("adagrad channels_last", optim::AdagradOptions{}, DType::Float32, sizes,
                                    seed += 10, format);
  }
}

TEST_CASE("CUDA optimizer steps match the CPU for every configuration", "[cuda]") {
  uint64_t seed = 7000;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& sizes : {Shape{37, 53}, Shape{(1 << 20) + 3}}) {
      check_optimizer<optim::SGD>("sgd", optim::SGDOptions{.lr = 0.1}, dtype, sizes, seed += 10);
      check_optimizer<optim::SGD>("sgd momentum", optim::SGDOptions{.lr = 0.1, .momentum = 0.9}, dtype, sizes, seed += 10);
      check_optimizer<optim::SGD>("sgd dampening weight_decay",
                                  optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01},
                                  dtype, sizes, seed += 10);
      check_optimizer<optim::SGD>("sgd nesterov",
                                  optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true},
                                  dtype, sizes, seed += 10);
      check_optimizer<optim::Adam>("adam", optim::AdamOptions{.lr = 0.01}, dtype, sizes, seed += 10);
      check_optimizer<optim::Adam>("adam weight_decay", optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}, dtype, sizes,
                                   seed += 10);
      check_optimizer<optim::Adam>("adam amsgrad", optim::AdamOptions{.lr = 0.01, .amsgrad = true}, dtype, sizes,
                                   seed += 10);
      check_optimizer<optim::AdamW>("adamw", optim::AdamWOptions{.lr = 0.01}, dtype, sizes, seed += 10);
      check_optimizer<optim::AdamW>("adamw amsgrad", optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.05, .amsgrad = true},
                                    dtype, sizes, seed += 10);
      check_optimizer<optim::Adagrad>("adagrad", optim::AdagradOptions{}, dtype, sizes, seed += 10);
      check_optimizer<optim::Adagrad>(
          "adagrad decay",
          optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.1, .initial_accumulator_value = 0.1},
          dtype, sizes, seed += 10);
    }
  }
  // 16-bit parameters compute in float and round each stored value, as on the CPU.
  for (DType dtype : kHalfTypes) {
    Tensor param_cpu = random_values({33, 65}, dtype, 7900);
    Tensor param_cuda = param_cpu.to(kCuda);
    param_cpu.requires_grad_();
    param_cuda.requires_grad_();
    optim::Adam adam_cpu({param_cpu}, {.lr = 0.01});
    optim::Adam adam_cuda({param_cuda}, {.lr = 0.01});
    Tensor gradient = random_values({33, 65}, dtype, 7901);
    param_cpu.set_grad(gradient);
    param_cuda.set_grad(gradient.to(kCuda));
    adam_cpu.step();
    adam_cuda.step();
    check_close(param_cuda.detach(), param_cpu.detach(), tolerance(dtype), std::string("adam ") + dtype_name(dtype));
  }
}

TEST_CASE("CUDA multi-tensor Adam, SGD and Adagrad match one CPU update per parameter", "[cuda]") {
  // Sizes around the chunk (4096 elements), a large tensor, an empty one, and 1500 small
  // ones: 1507 non-empty tensors. One launch takes 541 tensors of Adam's five lists and 738
  // of SGD's or Adagrad's three (cuda/kernels/multi_tensor_apply.cuh: CUDA 12.1's 32,764
  // bytes of kernel arguments), so every update below takes three launches, the last one
  // partial, and the 1508 step counters six launches of up to 256.
  std::vector<Shape> sizes = {{1}, {3}, {4096}, {4097}, {0}, {70001}, {(1 << 20) + 3}, {37, 53}};
  for (int i = 0; i < 1500; ++i) sizes.push_back({i % 7 + 1, 5});
  const size_t count = sizes.size();

  for (bool amsgrad : {false, true}) {
    AdamHyper hyper{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.05,
                    .decoupled_weight_decay = amsgrad, .amsgrad = amsgrad};
    std::vector<Tensor> params_cpu, params_cuda, exp_avg_cpu, exp_avg_cuda, exp_avg_sq_cpu, exp_avg_sq_cuda,
        max_cpu, max_cuda, steps_cpu, steps_cuda;
    for (size_t i = 0; i < count; ++i) {
      params_cpu.push_back(random_values(sizes[i], DType::Float32, 8000 + i));
      params_cuda.push_back(params_cpu.back().to(kCuda));
      exp_avg_cpu.push_back(zeros(sizes[i]));
      exp_avg_cuda.push_back(zeros(sizes[i], {.device = kCuda}));
      exp_avg_sq_cpu.push_back(zeros(sizes[i]));
      exp_avg_sq_cuda.push_back(zeros(sizes[i], {.device = kCuda}));
      if (amsgrad) {
        max_cpu.push_back(zeros(sizes[i]));
        max_cuda.push_back(zeros(sizes[i], {.device = kCuda}));
      }
      steps_cpu.push_back(zeros({}));
      steps_cuda.push_back(zeros({}, {.device = kCuda}));
    }
    for (int step = 0; step < 3; ++step) {
      std::vector<Tensor> grads_cpu, grads_cuda;
      for (size_t i = 0; i < count; ++i) {
        grads_cpu.push_back(random_values(sizes[i], DType::Float32, 9000 + 1000 * step + i));
        grads_cuda.push_back(grads_cpu.back().to(kCuda));
      }
      cpu_kernels().adam_step(params_cpu, grads_cpu, exp_avg_cpu, exp_avg_sq_cpu, max_cpu, steps_cpu, hyper);
      cuda::adam_step(params_cuda, grads_cuda, exp_avg_cuda, exp_avg_sq_cuda, max_cuda, steps_cuda, hyper);
    }
    for (size_t i = 0; i < count; ++i) {
      std::string what = "adam_step tensor " + std::to_string(i) + " " + sizes[i].str() +
                         (amsgrad ? " amsgrad" : "");
      // NOTE: the step lr * m / (sqrt(v) + eps) is ill-conditioned where |grad| is near eps
      // (here 1e-6): a few float32 ulps in sqrt(v) move the ratio by ~1e-3, i.e. the
      // parameter by lr * 1e-3 = 1e-5. The moments themselves agree to 1e-6.
      check_close(params_cuda[i], params_cpu[i], 1e-5, what + " param");
      check_close(exp_avg_cuda[i], exp_avg_cpu[i], 1e-6, what + " exp_avg");
      check_close(exp_avg_sq_cuda[i], exp_avg_sq_cpu[i], 1e-6, what + " exp_avg_sq");
      if (amsgrad) check_close(max_cuda[i], max_cpu[i], 1e-6, what + " max_exp_avg_sq");
      CHECK(steps_cuda[i].item<float>() == 3.0f);
    }
  }

  for (bool momentum : {false, true}) {
    std::vector<Tensor> params_cpu, params_cuda, buffers_cpu, buffers_cuda;
    for (size_t i = 0; i < count; ++i) {
      params_cpu.push_back(random_values(sizes[i], DType::Float32, 10000 + i));
      params_cuda.push_back(params_cpu.back().to(kCuda));
      if (momentum) {
        buffers_cpu.push_back(zeros(sizes[i]));
        buffers_cuda.push_back(zeros(sizes[i], {.device = kCuda}));
      }
    }
    for (int step = 0; step < 3; ++step) {
      SgdHyper hyper{.lr = 0.05, .momentum = momentum ? 0.9 : 0.0, .dampening = 0.1, .weight_decay = 0.01,
                     .nesterov = momentum, .first_step = step == 0};
      std::vector<Tensor> grads_cpu, grads_cuda;
      for (size_t i = 0; i < count; ++i) {
        grads_cpu.push_back(random_values(sizes[i], DType::Float32, 11000 + 1000 * step + i));
        grads_cuda.push_back(grads_cpu.back().to(kCuda));
      }
      cpu_kernels().sgd_step(params_cpu, grads_cpu, buffers_cpu, hyper);
      cuda::sgd_step(params_cuda, grads_cuda, buffers_cuda, hyper);
    }
    for (size_t i = 0; i < count; ++i) {
      std::string what = "sgd_step tensor " + std::to_string(i) + (momentum ? " momentum" : "");
      check_close(params_cuda[i], params_cpu[i], 1e-6, what + " param");
      if (momentum) check_close(buffers_cuda[i], buffers_cpu[i], 1e-6, what + " momentum_buffer");
    }
  }

  {
    // Sums start at a positive value, as with initial_accumulator_value, so no update
    // divides by eps alone.
    AdagradHyper hyper{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.1, .eps = 1e-10};
    std::vector<Tensor> params_cpu, params_cuda, sums_cpu, sums_cuda, steps_cpu, steps_cuda;
    for (size_t i = 0; i < count; ++i) {
      params_cpu.push_back(random_values(sizes[i], DType::Float32, 12000 + i));
      params_cuda.push_back(params_cpu.back().to(kCuda));
      sums_cpu.push_back(full(sizes[i], 0.1));
      sums_cuda.push_back(sums_cpu.back().to(kCuda));
      steps_cpu.push_back(zeros({}));
      steps_cuda.push_back(zeros({}, {.device = kCuda}));
    }
    for (int step = 0; step < 3; ++step) {
      std::vector<Tensor> grads_cpu, grads_cuda;
      for (size_t i = 0; i < count; ++i) {
        grads_cpu.push_back(random_values(sizes[i], DType::Float32, 13000 + 1000 * step + i));
        grads_cuda.push_back(grads_cpu.back().to(kCuda));
      }
      cpu_kernels().adagrad_step(params_cpu, grads_cpu, sums_cpu, steps_cpu, hyper);
      cuda::adagrad_step(params_cuda, grads_cuda, sums_cuda, steps_cuda, hyper);
    }
    for (size_t i = 0; i < count; ++i) {
      std::string what = "adagrad_step tensor " + std::to_string(i) + " " + sizes[i].str();
      check_close(params_cuda[i], params_cpu[i], 1e-6, what + " param");
      check_close(sums_cuda[i], sums_cpu[i], 1e-6, what + " sum");
      CHECK(steps_cuda[i].item<float>() == 3.0f);
    }
  }
}
