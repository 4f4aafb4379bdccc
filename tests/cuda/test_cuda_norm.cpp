// tests/cuda/test_cuda_norm.cpp — the CUDA batch_norm kernels against the CPU ones on fresh
// random inputs: training forward, the running statistics it updates on the device,
// evaluation forward, and the backward (grad_input, grad_weight, grad_bias), for (N, C)
// and (N, C, H, W) shapes in NCHW and channels-last layouts, including channels whose
// reductions span many blocks; batch_norm_relu, the same with a fused ReLU;
// batch_norm_add_relu, with a residual added before the ReLU; and the batch counter
// (num_batches_tracked) the training forward increments in its own launches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/norm.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "cuda/kernel_checks.h"

using namespace mg;

namespace {

using cuda_checks::check_within_scale;
using cuda_checks::host_values;
using cuda_checks::random_normal;

// The same bytes on the GPU (no conversion on either side).
Tensor on_cuda(const Tensor& tensor) { return converted_copy(tensor, tensor.dtype(), Device::cuda()); }

struct Case {
  Shape sizes;
  DType dtype;
};

}  // namespace

TEST_CASE("CUDA batch_norm training matches the CPU (forward, running stats, backward)", "[cuda]") {
  auto [sizes, dtype] = GENERATE(Case{{8, 3}, DType::Float32}, Case{{4, 5, 7, 9}, DType::Float32},
                                 Case{{3, 2, 33, 31}, DType::Float32}, Case{{16, 4, 1, 1}, DType::Float32},
                                 Case{{5, 3, 6, 4}, DType::Float64}, Case{{64, 7}, DType::Float64});
  const double relative = dtype == DType::Float64 ? 1e-12 : 1e-5;
  int64_t channels = sizes[1];
  // An offset well above the spread: the two-pass variance must not cancel.
  Tensor x = random_normal(sizes, dtype, 1, 2.0, 3.0).requires_grad_();
  Tensor weight = random_normal({channels}, dtype, 2).requires_grad_();
  Tensor bias = random_normal({channels}, dtype, 3).requires_grad_();
  Tensor cpu_running_mean = random_normal({channels}, dtype, 4), cpu_running_var = ones({channels}, {.dtype = dtype});
  Tensor cuda_x = on_cuda(x.detach()).requires_grad_(), cuda_weight = on_cuda(weight.detach()).requires_grad_();
  Tensor cuda_bias = on_cuda(bias.detach()).requires_grad_();
  Tensor cuda_running_mean = on_cuda(cpu_running_mean), cuda_running_var = on_cuda(cpu_running_var);

  Tensor grad_output = random_normal(sizes, dtype, 5);
  for (int step = 0; step < 2; ++step) {
    Tensor cpu_out = batch_norm(x, cpu_running_mean, cpu_running_var, weight, bias, true, 0.1, 1e-5);
    Tensor cuda_out = batch_norm(cuda_x, cuda_running_mean, cuda_running_var, cuda_weight, cuda_bias, true, 0.1, 1e-5);
    check_within_scale(cuda_out, cpu_out, relative);
    if (step == 0) {
      sum(mul(cpu_out, grad_output)).backward();
      sum(mul(cuda_out, on_cuda(grad_output))).backward();
    }
  }
  check_within_scale(cuda_running_mean, cpu_running_mean, relative);
  check_within_scale(cuda_running_var, cpu_running_var, relative);
  check_within_scale(cuda_x.grad(), x.grad(), relative);
  check_within_scale(cuda_weight.grad(), weight.grad(), relative);
  check_within_scale(cuda_bias.grad(), bias.grad(), relative);
}

TEST_CASE("CUDA batch_norm evaluation matches the CPU", "[cuda]") {
  auto [sizes, dtype] = GENERATE(Case{{8, 3}, DType::Float32}, Case{{2, 5, 7, 9}, DType::Float32},
                                 Case{{3, 4, 5, 6}, DType::Float64});
  const double relative = dtype == DType::Float64 ? 1e-12 : 1e-5;
  int64_t channels = sizes[1];
  Tensor x = random_normal(sizes, dtype, 11);
  Tensor weight = random_normal({channels}, dtype, 12), bias = random_normal({channels}, dtype, 13);
  Tensor running_mean = random_normal({channels}, dtype, 14);
  Tensor running_var = converted_copy(
      from_vector<double>(std::vector<double>(channels, 0.5), {channels}), dtype, Device::cpu());
  Tensor cpu_out = batch_norm(x, running_mean, running_var, weight, bias, false, 0.1, 1e-5);
  Tensor cuda_out = batch_norm(on_cuda(x), on_cuda(running_mean), on_cuda(running_var), on_cuda(weight),
                               on_cuda(bias), false, 0.1, 1e-5);
  check_within_scale(cuda_out, cpu_out, relative);
}

TEST_CASE("CUDA batch_norm without weight, bias or running statistics", "[cuda]") {
  Tensor x = random_normal({6, 3, 4, 4}, DType::Float32, 21).requires_grad_();
  Tensor cuda_x = on_cuda(x.detach()).requires_grad_();
  Tensor cpu_out = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  Tensor cuda_out = batch_norm(cuda_x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  check_within_scale(cuda_out, cpu_out, 1e-5);
  Tensor grad_output = random_normal({6, 3, 4, 4}, DType::Float32, 22);
  sum(mul(cpu_out, grad_output)).backward();
  sum(mul(cuda_out, on_cuda(grad_output))).backward();
  check_within_scale(cuda_x.grad(), x.grad(), 1e-5);
}

namespace {

// The same values laid out in `format` (a copy when the layout differs).
Tensor laid_out(const Tensor& tensor, MemoryFormat format) {
  return is_contiguous_in(tensor, format) ? tensor : contiguous_copy(tensor, format);
}

struct LayoutCase {
  Shape sizes;
  DType dtype;
  double offset;  // added to N(0, 2^2) inputs: the statistics must not cancel
};

}  // namespace

// The CPU runs NCHW; the GPU runs NCHW and channels-last. The shapes cover the reduction
// grids: many chunks per channel (64 x 64 x 32 x 32), few channels (3), odd runs that
// defeat vector accesses (7 x 7, 5 x 3), the ResNet-50 tail (2048 channels of 7 x 7), and
// one value per pixel (H = W = 1, where both layouts are the rows layout).
TEST_CASE("CUDA batch_norm in NCHW and channels_last matches the CPU (forward, running stats, backward, eval)",
          "[cuda]") {
  auto [sizes, dtype, offset] = GENERATE(
      LayoutCase{{4, 5, 7, 9}, DType::Float32, 3.0}, LayoutCase{{64, 64, 32, 32}, DType::Float32, 3.0},
      LayoutCase{{64, 3, 32, 32}, DType::Float32, 3.0}, LayoutCase{{32, 64, 7, 7}, DType::Float32, 3.0},
      LayoutCase{{8, 2048, 7, 7}, DType::Float32, 3.0}, LayoutCase{{16, 40, 1, 1}, DType::Float32, 3.0},
      LayoutCase{{6, 33, 5, 3}, DType::Float32, 1000.0}, LayoutCase{{5, 3, 6, 4}, DType::Float64, 3.0},
      LayoutCase{{7, 96, 8, 8}, DType::Float64, 3.0});
  auto format = GENERATE(MemoryFormat::Contiguous, MemoryFormat::ChannelsLast);
  INFO("input " << sizes << " " << dtype << " in " << format << ", offset " << offset);
  // At an offset of 1000 a float32 mean is only known to 6e-5 (one ulp), and the two devices
  // may round it differently: the gradients then differ by about that much.
  const double relative = dtype == DType::Float64 ? 1e-12 : (offset > 100 ? 1e-4 : 1e-5);
  int64_t channels = sizes[1];
  Tensor x = random_normal(sizes, dtype, 31, 2.0, offset).requires_grad_();
  Tensor weight = random_normal({channels}, dtype, 32).requires_grad_();
  Tensor bias = random_normal({channels}, dtype, 33).requires_grad_();
  Tensor cpu_running_mean = random_normal({channels}, dtype, 34), cpu_running_var = ones({channels}, {.dtype = dtype});
  Tensor cuda_x = laid_out(on_cuda(x.detach()), format).requires_grad_();
  Tensor cuda_weight = on_cuda(weight.detach()).requires_grad_(), cuda_bias = on_cuda(bias.detach()).requires_grad_();
  Tensor cuda_running_mean = on_cuda(cpu_running_mean), cuda_running_var = on_cuda(cpu_running_var);
  Tensor grad_output = random_normal(sizes, dtype, 35);
  // The gradient batch_norm hands back, seen before the leaf's accumulation copies it.
  Tensor incoming;
  cuda_x.register_hook([&](const Tensor& grad) {
    incoming = grad;
    return Tensor();
  });

  Tensor cpu_out = batch_norm(x, cpu_running_mean, cpu_running_var, weight, bias, true, 0.1, 1e-5);
  Tensor cuda_out = batch_norm(cuda_x, cuda_running_mean, cuda_running_var, cuda_weight, cuda_bias, true, 0.1, 1e-5);
  CHECK(is_contiguous_in(cuda_out, format));
  check_within_scale(cuda_out, cpu_out, relative);
  check_within_scale(cuda_running_mean, cpu_running_mean, relative);
  check_within_scale(cuda_running_var, cpu_running_var, relative);

  sum(mul(cpu_out, grad_output)).backward();
  // The incoming gradient in the other layout: the backward must bring it to the input's.
  sum(mul(cuda_out, on_cuda(grad_output))).backward();
  CHECK(is_contiguous_in(incoming, format));
  check_within_scale(cuda_x.grad(), x.grad(), relative);
  check_within_scale(cuda_weight.grad(), weight.grad(), relative);
  check_within_scale(cuda_bias.grad(), bias.grad(), relative);

  NoGradGuard no_grad;
  Tensor cpu_eval = batch_norm(x, cpu_running_mean, cpu_running_var, weight, bias, false, 0.1, 1e-5);
  Tensor cuda_eval = batch_norm(cuda_x, cuda_running_mean, cuda_running_var, cuda_weight, cuda_bias, false, 0.1, 1e-5);
  CHECK(is_contiguous_in(cuda_eval, format));
  check_within_scale(cuda_eval, cpu_eval, relative);
}

TEST_CASE("CUDA batch_norm of float16 channels_last activations with float32 statistics", "[cuda]") {
  Shape sizes{16, 64, 8, 8};
  Tensor x = random_normal(sizes, DType::Float16, 41, 2.0, 1.0);
  Tensor weight = random_normal({64}, DType::Float32, 42), bias = random_normal({64}, DType::Float32, 43);
  Tensor running_mean = zeros({64}), running_var = ones({64});
  Tensor cuda_running_mean = on_cuda(running_mean), cuda_running_var = on_cuda(running_var);
  Tensor cpu_out = batch_norm(x, running_mean, running_var, weight, bias, true, 0.1, 1e-5);
  Tensor cuda_out = batch_norm(contiguous_copy(on_cuda(x), MemoryFormat::ChannelsLast), cuda_running_mean,
                               cuda_running_var, on_cuda(weight), on_cuda(bias), true, 0.1, 1e-5);
  CHECK(is_contiguous_in(cuda_out, MemoryFormat::ChannelsLast));
  check_within_scale(cuda_out, cpu_out, 4e-3);  // a few float16 ulps
  check_within_scale(cuda_running_mean, running_mean, 1e-5);
  check_within_scale(cuda_running_var, running_var, 1e-5);
}

// batch_norm_relu: the fused kernels against the CPU's, and against batch_norm then relu
// on the GPU itself, in both layouts; float16 with float32 statistics as under autocast.
TEST_CASE("CUDA batch_norm_relu matches the CPU and the unfused ops (forward, running stats, backward, eval)",
          "[cuda]") {
  auto [sizes, dtype, offset] = GENERATE(
      LayoutCase{{4, 5, 7, 9}, DType::Float32, 0.5}, LayoutCase{{32, 64, 16, 16}, DType::Float32, 0.5},
      LayoutCase{{8, 2048, 7, 7}, DType::Float32, 0.5}, LayoutCase{{5, 3, 6, 4}, DType::Float64, 0.5},
      LayoutCase{{16, 64, 8, 8}, DType::Float16, 1.0}, LayoutCase{{16, 24, 5, 5}, DType::BFloat16, 1.0},
      // channels_last float16 with C = 64 and 128: a warp reads 4 and 2 whole rows.
      LayoutCase{{8, 128, 6, 6}, DType::Float16, 1.0});
  auto format = GENERATE(MemoryFormat::Contiguous, MemoryFormat::ChannelsLast);
  // Weight, bias and running statistics stay float32 under autocast; a model made .half()
  // keeps them in the input's 16-bit dtype, and the backward then reads float32 copies
  // (cuda/plan/batch_norm_workspace.h's batch_norm_channel_operand): the ReLU's mask it
  // rebuilds must still meet the forward's.
  const bool parameters_in_input_dtype = GENERATE(false, true);
  INFO("input " << sizes << " " << dtype << " in " << format
                << (parameters_in_input_dtype ? ", parameters in the input's dtype" : ""));
  const bool half = is_16_bit_float(dtype);
  const DType stats = half && !parameters_in_input_dtype ? DType::Float32 : dtype;
  // 16-bit: a few ulps of the output (float16 2^-11, bfloat16 2^-8) of values up to ~4.
  const double relative = dtype == DType::Float64 ? 1e-12
                          : dtype == DType::Float32 ? 1e-5
                          : dtype == DType::Float16 ? 4e-3
                                                    : 3e-2;
  // Parameters' gradients: summed over the batch in float32, rounded to 16 bits when the
  // parameters are; running statistics: rounded to their dtype.
  const double parameter_relative = !half ? relative : stats == dtype ? 2e-2 : 1e-2;
  const double running_relative = stats == dtype && half ? relative : 1e-5;
  int64_t channels = sizes[1];
  Tensor x = random_normal(sizes, dtype, 61, 2.0, offset).requires_grad_();
  Tensor weight = random_normal({channels}, stats, 62).requires_grad_();
  Tensor bias = random_normal({channels}, stats, 63).requires_grad_();
  Tensor cpu_running_mean = random_normal({channels}, stats, 64), cpu_running_var = ones({channels}, {.dtype = stats});
  Tensor cuda_x = laid_out(on_cuda(x.detach()), format).requires_grad_();
  Tensor cuda_weight = on_cuda(weight.detach()).requires_grad_(), cuda_bias = on_cuda(bias.detach()).requires_grad_();
  Tensor cuda_running_mean = on_cuda(cpu_running_mean), cuda_running_var = on_cuda(cpu_running_var);
  Tensor grad_output = random_normal(sizes, dtype, 65);

  Tensor cpu_out = batch_norm_relu(x, cpu_running_mean, cpu_running_var, weight, bias, true, 0.1, 1e-5);
  Tensor cuda_out =
      batch_norm_relu(cuda_x, cuda_running_mean, cuda_running_var, cuda_weight, cuda_bias, true, 0.1, 1e-5);
  CHECK(is_contiguous_in(cuda_out, format));
  REQUIRE(cuda_out.grad_fn() != nullptr);
  CHECK(std::string(cuda_out.grad_fn()->name()) == "BatchNormReluBackward");
  check_within_scale(cuda_out, cpu_out, relative);
  check_within_scale(cuda_running_mean, cpu_running_mean, running_relative);
  check_within_scale(cuda_running_var, cpu_running_var, running_relative);
  std::vector<double> outputs = host_values(cuda_out);
  CHECK(*std::min_element(outputs.begin(), outputs.end()) == 0.0);  // the ReLU clamped some

  sum(mul(cpu_out, grad_output)).backward();
  sum(mul(cuda_out, on_cuda(grad_output))).backward();
  CHECK(cuda_weight.grad().dtype() == stats);
  check_within_scale(cuda_x.grad(), x.grad(), relative);
  check_within_scale(cuda_weight.grad(), weight.grad(), parameter_relative);
  check_within_scale(cuda_bias.grad(), bias.grad(), parameter_relative);

  SECTION("the same as batch_norm then relu on the GPU") {
    Tensor unfused_x = laid_out(on_cuda(x.detach()), format).requires_grad_();
    Tensor unfused_weight = on_cuda(weight.detach()).requires_grad_();
    Tensor unfused_bias = on_cuda(bias.detach()).requires_grad_();
    Tensor unfused = relu(batch_norm(unfused_x, Tensor(), Tensor(), unfused_weight, unfused_bias, true, 0.1, 1e-5));
    check_within_scale(cuda_out, unfused, relative);
    sum(mul(unfused, on_cuda(grad_output))).backward();
    check_within_scale(cuda_x.grad(), unfused_x.grad(), relative);
    check_within_scale(cuda_weight.grad(), unfused_weight.grad(), parameter_relative);
    check_within_scale(cuda_bias.grad(), unfused_bias.grad(), parameter_relative);
  }
  SECTION("evaluation, with and without gradients") {
    Tensor cpu_eval = batch_norm_relu(x, cpu_running_mean, cpu_running_var, weight, bias, false);
    Tensor cuda_eval = batch_norm_relu(cuda_x, cuda_running_mean, cuda_running_var, cuda_weight, cuda_bias, false);
    check_within_scale(cuda_eval, cpu_eval, relative);
    NoGradGuard no_grad;
    Tensor cuda_kernel_eval =
        batch_norm_relu(cuda_x, cuda_running_mean, cuda_running_var, cuda_weight, cuda_bias, false);
    CHECK(is_contiguous_in(cuda_kernel_eval, format));
    check_within_scale(cuda_kernel_eval, cpu_eval, relative);
  }
}

namespace {

// `tensor`'s values, dense in `format`, in a new buffer one element past a 16-byte
// boundary: no vector access lines up with them.
Tensor at_odd_offset(const Tensor& tensor, MemoryFormat format) {
  const Shape& sizes = tensor.sizes();
  Tensor buffer = empty({tensor.numel() + 1}, {.dtype = tensor.dtype(), .device = tensor.device()});
  Tensor flat = buffer.narrow(0, 1, tensor.numel());
  Tensor view = format == MemoryFormat::ChannelsLast
                    ? flat.view({sizes[0], sizes[2], sizes[3], sizes[1]}).permute({0, 3, 1, 2})
                    : flat.view(sizes);
  view.copy_(tensor);
  return view;
}

}  // namespace

// batch_norm_add_relu: the fused kernels (the residual read in the normalising pass, the
// residual's gradient written by the summing pass) against the CPU's, and against add_relu
// of batch_norm on the GPU itself. Odd channel counts and H * W that defeat the vector
// widths, (N, C) inputs, and 16-bit inputs with float32 statistics as under autocast.
TEST_CASE("CUDA batch_norm_add_relu matches the CPU and the unfused ops (forward, running stats, backward)",
          "[cuda]") {
  auto [sizes, dtype, offset] = GENERATE(
      LayoutCase{{4, 5, 7, 9}, DType::Float32, 0.5}, LayoutCase{{32, 64, 16, 16}, DType::Float32, 0.5},
      LayoutCase{{8, 2048, 7, 7}, DType::Float32, 0.5}, LayoutCase{{6, 33, 5, 3}, DType::Float32, 100.0},
      LayoutCase{{5, 3, 6, 4}, DType::Float64, 0.5}, LayoutCase{{7, 96, 8, 8}, DType::Float64, 0.5},
      LayoutCase{{16, 64, 8, 8}, DType::Float16, 1.0}, LayoutCase{{9, 13, 3, 5}, DType::Float16, 1.0},
      LayoutCase{{16, 24, 5, 5}, DType::BFloat16, 1.0}, LayoutCase{{11, 7, 7, 7}, DType::BFloat16, 1.0},
      LayoutCase{{37, 19}, DType::Float32, 0.5}, LayoutCase{{64, 40}, DType::Float16, 1.0});
  auto format = GENERATE(MemoryFormat::Contiguous, MemoryFormat::ChannelsLast);
  if (sizes.size() == 2 && format == MemoryFormat::ChannelsLast) return;  // (N, C) has one layout
  INFO("input " << sizes << " " << dtype << " in " << format << ", offset " << offset);
  const bool half = is_16_bit_float(dtype);
  const DType stats = half ? DType::Float32 : dtype;
  // As batch_norm_relu's test; at an offset of 100 a float32 mean is known to ~1e-5.
  const double relative = dtype == DType::Float64 ? 1e-12
                          : dtype == DType::Float32 ? (offset > 10 ? 1e-4 : 1e-5)
                          : dtype == DType::Float16 ? 4e-3
                                                    : 3e-2;
  const double sums = half ? 1e-2 : relative;  // grad_weight, grad_bias: sums of 16-bit values
  int64_t channels = sizes[1];
  Tensor x = random_normal(sizes, dtype, 71, 2.0, offset).requires_grad_();
  Tensor residual = random_normal(sizes, dtype, 72).requires_grad_();
  Tensor weight = random_normal({channels}, stats, 73).requires_grad_();
  Tensor bias = random_normal({channels}, stats, 74).requires_grad_();
  Tensor cpu_running_mean = random_normal({channels}, stats, 75), cpu_running_var = ones({channels}, {.dtype = stats});
  Tensor cuda_x = laid_out(on_cuda(x.detach()), format).requires_grad_();
  Tensor cuda_residual = laid_out(on_cuda(residual.detach()), format).requires_grad_();
  Tensor cuda_weight = on_cuda(weight.detach()).requires_grad_(), cuda_bias = on_cuda(bias.detach()).requires_grad_();
  Tensor cuda_running_mean = on_cuda(cpu_running_mean), cuda_running_var = on_cuda(cpu_running_var);
  Tensor grad_output = random_normal(sizes, dtype, 76);
  {
    // Each device takes the ReLU's mask from its own output, and an output within rounding
    // of 0 may be clamped on one device and not on the other (among 800,000 float32 values
    // some lie within 1e-6 of 0). The gradient is zeroed there, so that a flipped mask
    // multiplies 0 and the comparisons below test the kernels, not the coin flips.
    NoGradGuard no_grad;
    auto as_double = [](const Tensor& t) { return converted_copy(t.detach(), DType::Float64, Device::cpu()); };
    Tensor before_relu = add(batch_norm(as_double(x), Tensor(), Tensor(), as_double(weight), as_double(bias), true),
                             as_double(residual));
    const std::vector<double> values = host_values(before_relu);
    double largest = 0;
    for (double value : values) largest = std::max(largest, std::abs(value));
    Tensor clear_of_zero = gt(abs(before_relu), 8 * relative * largest);
    grad_output = mul(grad_output, converted_copy(clear_of_zero, dtype, Device::cpu()));
  }

  Tensor cpu_out =
      batch_norm_add_relu(x, residual, cpu_running_mean, cpu_running_var, weight, bias, true, 0.1, 1e-5);
  Tensor cuda_out = batch_norm_add_relu(cuda_x, cuda_residual, cuda_running_mean, cuda_running_var, cuda_weight,
                                        cuda_bias, true, 0.1, 1e-5);
  CHECK(is_contiguous_in(cuda_out, format));
  REQUIRE(cuda_out.grad_fn() != nullptr);
  CHECK(std::string(cuda_out.grad_fn()->name()) == "BatchNormAddReluBackward");
  check_within_scale(cuda_out, cpu_out, relative);
  check_within_scale(cuda_running_mean, cpu_running_mean, 1e-5);
  check_within_scale(cuda_running_var, cpu_running_var, 1e-5);
  std::vector<double> outputs = host_values(cuda_out);
  CHECK(*std::min_element(outputs.begin(), outputs.end()) == 0.0);  // the ReLU clamped some

  sum(mul(cpu_out, grad_output)).backward();
  sum(mul(cuda_out, on_cuda(grad_output))).backward();
  check_within_scale(cuda_x.grad(), x.grad(), relative);
  // The residual's gradient is grad_output or 0, the same mask on both devices where the
  // gradient is not zeroed: exact.
  check_within_scale(cuda_residual.grad(), residual.grad(), 0.0);
  CHECK(is_contiguous_in(cuda_residual.grad(), format));
  check_within_scale(cuda_weight.grad(), weight.grad(), sums);
  check_within_scale(cuda_bias.grad(), bias.grad(), sums);

  SECTION("the same as add_relu of batch_norm on the GPU") {
    Tensor unfused_x = laid_out(on_cuda(x.detach()), format).requires_grad_();
    Tensor unfused_residual = laid_out(on_cuda(residual.detach()), format).requires_grad_();
    Tensor unfused_weight = on_cuda(weight.detach()).requires_grad_();
    Tensor unfused_bias = on_cuda(bias.detach()).requires_grad_();
    Tensor unfused = add_relu(batch_norm(unfused_x, Tensor(), Tensor(), unfused_weight, unfused_bias, true, 0.1, 1e-5),
                              unfused_residual);
    // 16-bit: the unfused ops round batch_norm's output before the add.
    check_within_scale(cuda_out, unfused, relative);
    sum(mul(unfused, on_cuda(grad_output))).backward();
    check_within_scale(cuda_x.grad(), unfused_x.grad(), relative);
    check_within_scale(cuda_residual.grad(), unfused_residual.grad(), half ? relative : 0.0);
    check_within_scale(cuda_weight.grad(), unfused_weight.grad(), sums);
    check_within_scale(cuda_bias.grad(), unfused_bias.grad(), sums);
  }
  SECTION("inputs and residuals one element off the vector alignment") {
    Tensor odd_x = at_odd_offset(cuda_x.detach(), format).requires_grad_();
    Tensor odd_residual = at_odd_offset(cuda_residual.detach(), format).requires_grad_();
    REQUIRE(is_contiguous_in(odd_x, format));
    Tensor odd = batch_norm_add_relu(odd_x, odd_residual, Tensor(), Tensor(), cuda_weight.detach(),
                                     cuda_bias.detach(), true, 0.1, 1e-5);
    CHECK(std::string(odd.grad_fn()->name()) == "BatchNormAddReluBackward");
    check_within_scale(odd, cpu_out, relative);
    sum(mul(odd, on_cuda(grad_output))).backward();
    check_within_scale(odd_x.grad(), x.grad(), relative);
    check_within_scale(odd_residual.grad(), residual.grad(), 0.0);
  }
  SECTION("evaluation: add_relu of batch_norm") {
    Tensor cpu_eval = batch_norm_add_relu(x, residual, cpu_running_mean, cpu_running_var, weight, bias, false);
    Tensor cuda_eval = batch_norm_add_relu(cuda_x, cuda_residual, cuda_running_mean, cuda_running_var, cuda_weight,
                                           cuda_bias, false);
    CHECK(std::string(cuda_eval.grad_fn()->name()) == "AddReluBackward");
    check_within_scale(cuda_eval, cpu_eval, relative);
  }
}

TEST_CASE("CUDA batch_norm_add_relu refuses a residual on another device", "[cuda]") {
  Tensor x = on_cuda(random_normal({4, 3, 2, 2}, DType::Float32, 81));
  CHECK_THROWS_WITH(batch_norm_add_relu(x, random_normal({4, 3, 2, 2}, DType::Float32, 82), {}, {}, {}, {}, true),
                    Catch::Contains("batch_norm_add_relu: expected the residual on the input's device cuda"));
}

namespace {

// The per-channel sums of an (N, C) or (N, C, H, W) CPU tensor as a convolution's epilogue
// hands them over (core/channel_sums.h): float32 (C) each, on `device`; added in double.
ChannelSums channel_sums_of(const Tensor& x, Device device) {
  const int64_t channels = x.sizes()[1], inner = x.numel() / (x.sizes()[0] * channels);
  std::vector<double> values = host_values(x), sum(channels, 0.0), square_sum(channels, 0.0);
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t c = (static_cast<int64_t>(i) / inner) % channels;
    sum[c] += values[i];
    square_sum[c] += values[i] * values[i];
  }
  auto on_device = [&](const std::vector<double>& sums) {
    return converted_copy(from_vector<double>(sums, {channels}), DType::Float32, device);
  };
  return {on_device(sum), on_device(square_sum)};
}

enum class Fused { None, Relu, AddRelu };

// Training or evaluation forward of the batch norm variant `fused` (the residual is read
// by AddRelu only), with the momentum and eps of nn::BatchNorm2d.
Tensor fused_batch_norm(Fused fused, const Tensor& x, const Tensor& residual, const Tensor& mean, const Tensor& var,
                        const Tensor& w, const Tensor& b, bool training, const ChannelSums& statistics,
                        const Tensor& counter) {
  switch (fused) {
    case Fused::None: return batch_norm(x, mean, var, w, b, training, 0.1, 1e-5, statistics, counter);
    case Fused::Relu: return batch_norm_relu(x, mean, var, w, b, training, 0.1, 1e-5, statistics, counter);
    default: return batch_norm_add_relu(x, residual, mean, var, w, b, training, 0.1, 1e-5, statistics, counter);
  }
}

struct CountCase {
  Shape sizes;
  MemoryFormat format;
};

}  // namespace

// The counter rides in a launch the training forward makes anyway (the statistics' finish,
// or the one kernel of statistics given by a convolution): k training forwards count k on
// the GPU as on the CPU, with the running statistics the CPU's, in NCHW, channels-last and
// (N, C), for each fused variant; evaluation counts nothing. 20 channels: the finish runs
// in several blocks, of which channel 0's alone may count; the larger shapes give the
// statistics' reduction many blocks a channel, in both layouts.
TEST_CASE("CUDA batch_norm counts num_batches_tracked in its own launches, running stats as the CPU", "[cuda]") {
  auto [sizes, format] =
      GENERATE(CountCase{{8, 20, 5, 5}, MemoryFormat::Contiguous}, CountCase{{8, 20, 5, 5}, MemoryFormat::ChannelsLast},
               CountCase{{64, 20}, MemoryFormat::Contiguous}, CountCase{{32, 64, 16, 16}, MemoryFormat::ChannelsLast},
               CountCase{{32, 64, 16, 16}, MemoryFormat::Contiguous});
  const Fused fused = GENERATE(Fused::None, Fused::Relu, Fused::AddRelu);
  const bool given = GENERATE(false, true);
  INFO("input " << sizes << " in " << format << ", fused " << static_cast<int>(fused)
                << (given ? ", statistics given" : ""));
  // Given sums lose bits to E[x^2] - E[x]^2 in float32 on the GPU; the CPU finishes in double.
  const double relative = given ? 1e-4 : 1e-5;
  const int64_t channels = sizes[1];
  Tensor weight = random_normal({channels}, DType::Float32, 91), bias = random_normal({channels}, DType::Float32, 92);
  Tensor cpu_mean = random_normal({channels}, DType::Float32, 93), cpu_var = ones({channels});
  Tensor cuda_mean = on_cuda(cpu_mean), cuda_var = on_cuda(cpu_var);
  Tensor cuda_weight = on_cuda(weight), cuda_bias = on_cuda(bias);
  Tensor cpu_counter = zeros(Shape{}, {.dtype = DType::Int64}), cuda_counter = on_cuda(cpu_counter);
  constexpr int64_t kSteps = 3;
  for (int64_t step = 0; step < kSteps; ++step) {
    Tensor x = random_normal(sizes, DType::Float32, 100 + step, 2.0, 0.5);
    Tensor residual = random_normal(sizes, DType::Float32, 110 + step);
    const ChannelSums cpu_sums = given ? channel_sums_of(x, Device::cpu()) : ChannelSums{};
    const ChannelSums cuda_sums = given ? channel_sums_of(x, Device::cuda()) : ChannelSums{};
    Tensor cpu_out =
        fused_batch_norm(fused, x, residual, cpu_mean, cpu_var, weight, bias, true, cpu_sums, cpu_counter);
    Tensor cuda_out = fused_batch_norm(fused, laid_out(on_cuda(x), format), laid_out(on_cuda(residual), format),
                                       cuda_mean, cuda_var, cuda_weight, cuda_bias, true, cuda_sums, cuda_counter);
    check_within_scale(cuda_out, cpu_out, relative);
  }
  CHECK(cpu_counter.item<int64_t>() == kSteps);
  CHECK(cuda_counter.item<int64_t>() == kSteps);
  check_within_scale(cuda_mean, cpu_mean, relative);
  check_within_scale(cuda_var, cpu_var, relative);

  Tensor x = laid_out(on_cuda(random_normal(sizes, DType::Float32, 120)), format);
  {
    NoGradGuard no_grad;  // the evaluation kernel, not the composite
    fused_batch_norm(fused, x, x, cuda_mean, cuda_var, cuda_weight, cuda_bias, false, {}, cuda_counter);
  }
  fused_batch_norm(fused, x, x, cuda_mean, cuda_var, cuda_weight.detach().requires_grad_(), cuda_bias, false, {},
                   cuda_counter);
  CHECK(cuda_counter.item<int64_t>() == kSteps);
  // The kernel increments the counter where it runs: one on another device is refused.
  CHECK_THROWS_WITH(fused_batch_norm(fused, x, x, cuda_mean, cuda_var, cuda_weight, cuda_bias, true, {}, cpu_counter),
                    Catch::Contains("expected num_batches_tracked on the input's device cuda"));
  CHECK(cuda_counter.item<int64_t>() == kSteps);
}

// Statistics a convolution hands over (ChannelSums) against the same batch norm computing
// its own, in float16 channels-last as under autocast: 2048 channels (a pass's thread takes
// 8), 7 (one a thread), every fused variant, and sums handed over as views at an odd
// offset. The backward reads the saved statistics the given sums' finish stored. Handed the
// sums of another tensor, it normalises with their mean and variance, not x's: the sums
// are used, not recomputed.
TEST_CASE("CUDA batch_norm given a convolution's statistics matches its own statistics, forward and backward",
          "[cuda]") {
  const Shape sizes = GENERATE(Shape{8, 2048, 3, 3}, Shape{16, 7, 5, 5}, Shape{32, 64, 8, 8});
  const Fused fused = GENERATE(Fused::None, Fused::Relu, Fused::AddRelu);
  const bool sums_at_odd_offset = GENERATE(false, true);
  INFO("input " << sizes << ", fused " << static_cast<int>(fused) << (sums_at_odd_offset ? ", sums at offset 1" : ""));
  const int64_t channels = sizes[1];
  Tensor x = random_normal(sizes, DType::Float16, 130, 2.0, 0.5);
  Tensor residual = random_normal(sizes, DType::Float16, 131);
  Tensor grad_output = laid_out(on_cuda(random_normal(sizes, DType::Float16, 132)), MemoryFormat::ChannelsLast);
  ChannelSums sums = channel_sums_of(x, Device::cuda());
  if (sums_at_odd_offset) {
    auto shifted = [&](const Tensor& values) {
      Tensor buffer = zeros({channels + 1}, {.device = Device::cuda()});
      buffer.narrow(0, 1, channels).copy_(values);
      return buffer.narrow(0, 1, channels);
    };
    sums = {shifted(sums.sum), shifted(sums.square_sum)};
  }
  struct Run {
    Tensor out, grad_x, grad_weight, grad_bias, running_mean, running_var, counter;
  };
  auto run = [&](const ChannelSums& given) {
    Tensor cuda_x = laid_out(on_cuda(x), MemoryFormat::ChannelsLast).requires_grad_();
    Tensor cuda_residual = laid_out(on_cuda(residual), MemoryFormat::ChannelsLast);
    Tensor weight = on_cuda(random_normal({channels}, DType::Float32, 133)).requires_grad_();
    Tensor bias = on_cuda(random_normal({channels}, DType::Float32, 134)).requires_grad_();
    Tensor running_mean = on_cuda(random_normal({channels}, DType::Float32, 135));
    Tensor running_var = on_cuda(ones({channels}));
    Tensor counter = on_cuda(zeros(Shape{}, {.dtype = DType::Int64}));
    Tensor out =
        fused_batch_norm(fused, cuda_x, cuda_residual, running_mean, running_var, weight, bias, true, given, counter);
    sum(mul(out, grad_output)).backward();
    return Run{out, cuda_x.grad(), weight.grad(), bias.grad(), running_mean, running_var, counter};
  };
  const Run given = run(sums), own = run({});
  CHECK(is_contiguous_in(given.out, MemoryFormat::ChannelsLast));
  check_within_scale(given.out, own.out, 4e-3);  // a few float16 ulps: the sums round apart
  check_within_scale(given.running_mean, own.running_mean, 1e-4);
  check_within_scale(given.running_var, own.running_var, 1e-4);
  CHECK(given.counter.item<int64_t>() == 1);
  check_within_scale(given.grad_x, own.grad_x, 1e-2);
  check_within_scale(given.grad_weight, own.grad_weight, 1e-2);
  check_within_scale(given.grad_bias, own.grad_bias, 1e-2);

  // Sums of z (mean 1.5, std 0.7 a channel): the output is evaluation's with z's mean and
  // biased variance as the running statistics, computed on the CPU from the same sums.
  const Tensor z = random_normal(sizes, DType::Float16, 136, 0.7, 1.5);
  const ChannelSums z_sums = channel_sums_of(z, Device::cpu());
  const std::vector<double> z_sum = host_values(z_sums.sum), z_square_sum = host_values(z_sums.square_sum);
  const double count = static_cast<double>(x.numel() / channels);
  std::vector<double> z_mean(channels), z_var(channels);
  for (int64_t c = 0; c < channels; ++c) {
    z_mean[c] = z_sum[c] / count;
    z_var[c] = z_square_sum[c] / count - z_mean[c] * z_mean[c];
  }
  auto on_cpu_float = [](const Tensor& values) { return converted_copy(values, DType::Float32, Device::cpu()); };
  Tensor expected;
  {
    NoGradGuard no_grad;  // the evaluation kernel, not the composite
    expected = fused_batch_norm(fused, on_cpu_float(x), on_cpu_float(residual),
                                on_cpu_float(from_vector<double>(z_mean, {channels})),
                                on_cpu_float(from_vector<double>(z_var, {channels})),
                                random_normal({channels}, DType::Float32, 133),
                                random_normal({channels}, DType::Float32, 134), /*training=*/false, {}, {});
  }
  check_within_scale(run(channel_sums_of(z, Device::cuda())).out,
                     converted_copy(expected, DType::Float16, Device::cpu()), 4e-3);
}
