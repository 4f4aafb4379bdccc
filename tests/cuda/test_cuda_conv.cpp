// tests/cuda/test_cuda_conv.cpp — conv2d on CUDA against the CPU (Eigen) on fresh random
// inputs: forward and the input, weight and bias gradients for plain, strided, padded,
// dilated, grouped, depthwise and 1x1 convolutions; through cuDNN (heuristics and
// benchmark; float32 with and without TF32, float64, float16, bfloat16; NCHW,
// channels_last and mixed layouts) and through the im2col + cuBLAS kernels
// (set_cudnn_enabled(false)), which must also agree with cuDNN. Then what cuDNN borrows:
// its workspace shows in the WORKSPACE peak and is returned after the call, within the
// limit; and the algorithm cache: a repeated shape reuses its choice. The input gradient
// added in place into another branch's (cuDNN's beta = 1, im2col's col2im) is checked too.
// The reference runs in float64 on the CPU from the very values the device sees (16-bit
// inputs are rounded first), so the tolerances measure the device path alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/cudnn/settings.h"
#include "autograd/branch_sum.h"
#include "cuda/kernel_checks.h"
#include "memgrad/cuda/runtime.h"
#if MG_WITH_CUDNN
#include "memgrad/cuda/cudnn/algorithm_cache.h"
#endif

using namespace mg;

namespace {

using cuda_checks::host_values;

// Sets the convolution switches for a scope and restores the previous ones after, so test
// order never matters.
class ConvSettings {
 public:
  ConvSettings(bool enabled, bool benchmark, bool allow_tf32, bool deterministic = false)
      : enabled_(cuda::cudnn_enabled()),
        benchmark_(cuda::cudnn_benchmark()),
        allow_tf32_(cuda::cudnn_allow_tf32()),
        deterministic_(cuda::cudnn_deterministic()),
        workspace_limit_(cuda::cudnn_workspace_limit()) {
    cuda::set_cudnn_enabled(enabled);
    cuda::set_cudnn_benchmark(benchmark);
    cuda::set_cudnn_allow_tf32(allow_tf32);
    cuda::set_cudnn_deterministic(deterministic);
  }
  ~ConvSettings() {
    cuda::set_cudnn_enabled(enabled_);
    cuda::set_cudnn_benchmark(benchmark_);
    cuda::set_cudnn_allow_tf32(allow_tf32_);
    cuda::set_cudnn_deterministic(deterministic_);
    cuda::set_cudnn_workspace_limit(workspace_limit_);
  }
  ConvSettings(const ConvSettings&) = delete;
  ConvSettings& operator=(const ConvSettings&) = delete;

 private:
  bool enabled_, benchmark_, allow_tf32_, deterministic_;
  size_t workspace_limit_;
};

// Standard normal values in `dtype` (rounded there on the CPU).
Tensor normal(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return converted_copy(randn(sizes, {}, &generator), dtype, Device::cpu());
}

// The largest |got - expected| relative to the largest |expected|.
double relative_error(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.defined());
  REQUIRE(got.sizes() == expected.sizes());
  std::vector<double> actual = host_values(got), reference = host_values(expected);
  double scale = 1e-30, worst = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    scale = std::max(scale, std::abs(reference[i]));
    double error = std::abs(actual[i] - reference[i]);
    worst = std::isnan(error) ? INFINITY : std::max(worst, error);
  }
  return worst / scale;
}

struct Config {
  Shape input, weight;
  Conv2dOptions options;
};

std::vector<Config> configs() {
  return {
      {{2, 3, 9, 8}, {5, 3, 3, 3}, {}},
      {{3, 4, 11, 10}, {6, 2, 3, 2}, {.stride = {2, 1}, .padding = {1, 2}, .dilation = {2, 1}, .groups = 2}},
      {{2, 8, 7, 7}, {16, 8, 1, 1}, {}},
      {{2, 6, 12, 9}, {6, 1, 3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .groups = 6}},  // depthwise
      {{1, 4, 16, 16}, {8, 4, 5, 5}, {.stride = {3, 2}, .padding = {2, 2}, .dilation = {2, 3}}},
      {{4, 6, 5, 6}, {9, 2, 2, 3}, {.padding = {1, 0}, .groups = 3}},
      {{2, 16, 10, 10}, {32, 16, 3, 3}, {.padding = {1, 1}}},  // tensor-core friendly channel counts
  };
}

// Which tensors are channels_last.
enum class Layouts { Nchw, ChannelsLast, InputNchwWeightChannelsLast };

const char* layouts_name(Layouts layouts) {
  switch (layouts) {
    case Layouts::Nchw: return "NCHW";
    case Layouts::ChannelsLast: return "channels_last";
    case Layouts::InputNchwWeightChannelsLast: return "input NCHW, weight channels_last";
  }
  return "?";
}

// One run's output and gradients.
struct ConvResult {
  Tensor output, grad_input, grad_weight, grad_bias;
  // PyTorch's rule: channels_last when the input or weight is (a tensor dense in both
  // layouts, such as a 1x1 or depthwise weight, counts as NCHW).
  MemoryFormat expected_output_format;
};

// conv2d on `device` in `dtype` and `layouts`, from CPU values already rounded to
// `values_dtype`, then backward from an upstream gradient of random values (also rounded to
// values_dtype, from `upstream_seed`), so every gradient entry is exercised. A leaf gets its
// layout before it requires grad; the input and weight gradients are the ones conv2d's
// backward returns, caught by hooks before accumulation into .grad.
ConvResult run(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options,
               DType dtype, Layouts layouts, Device device, DType values_dtype, uint64_t upstream_seed) {
  auto leaf = [&](const Tensor& values, MemoryFormat format) {
    return contiguous_copy(converted_copy(values, dtype, device), format).requires_grad_();
  };
  MemoryFormat input_format = layouts == Layouts::ChannelsLast ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  MemoryFormat weight_format = layouts == Layouts::Nchw ? MemoryFormat::Contiguous : MemoryFormat::ChannelsLast;
  Tensor x = leaf(input, input_format), w = leaf(weight, weight_format), b = leaf(bias, MemoryFormat::Contiguous);
  Tensor grad_input, grad_weight;
  x.register_hook([&grad_input](const Tensor& grad) { grad_input = grad; return Tensor(); });
  w.register_hook([&grad_weight](const Tensor& grad) { grad_weight = grad; return Tensor(); });
  Tensor out = conv2d(x, w, b, options);
  Tensor upstream = converted_copy(normal(out.sizes(), values_dtype, upstream_seed), dtype, device);
  sum(mul(out, upstream)).backward();
  bool channels_last = suggest_memory_format(x) == MemoryFormat::ChannelsLast ||
                       suggest_memory_format(w) == MemoryFormat::ChannelsLast;
  return {out, grad_input, grad_weight, b.grad(),
          channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous};
}

// The current path on CUDA against float64 on the CPU, for every config and layout;
// `tolerance` is relative to the largest reference value. Checks the layouts too: the
// output is channels_last when the input or weight is, and each gradient keeps the layout
// of its tensor.
void check_against_cpu(DType dtype, double tolerance, uint64_t seed) {
  for (Layouts layouts : {Layouts::Nchw, Layouts::ChannelsLast, Layouts::InputNchwWeightChannelsLast}) {
    for (const Config& config : configs()) {
      Tensor input = normal(config.input, dtype, ++seed), weight = normal(config.weight, dtype, ++seed);
      Tensor bias = normal({config.weight[0]}, dtype, ++seed);
      uint64_t upstream_seed = ++seed;
      ConvResult expected = run(input, weight, bias, config.options, DType::Float64, Layouts::Nchw, Device::cpu(),
                                dtype, upstream_seed);
      ConvResult got = run(input, weight, bias, config.options, dtype, layouts, Device::cuda(), dtype, upstream_seed);

      INFO(dtype << ", " << layouts_name(layouts) << ", input " << config.input << " weight " << config.weight
                 << " groups " << config.options.groups << ", cuDNN " << (cuda::cudnn_enabled() ? "on" : "off")
                 << ", benchmark " << cuda::cudnn_benchmark() << ", TF32 " << cuda::cudnn_allow_tf32());
      CHECK(got.output.dtype() == dtype);
      CHECK(relative_error(got.output, expected.output) <= tolerance);
      CHECK(relative_error(got.grad_input, expected.grad_input) <= tolerance);
      CHECK(relative_error(got.grad_weight, expected.grad_weight) <= tolerance);
      CHECK(relative_error(got.grad_bias, expected.grad_bias) <= tolerance);

      MemoryFormat input_format =
          layouts == Layouts::ChannelsLast ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
      MemoryFormat weight_format = layouts == Layouts::Nchw ? MemoryFormat::Contiguous : MemoryFormat::ChannelsLast;
      CHECK(is_contiguous_in(got.output, got.expected_output_format));
      CHECK(is_contiguous_in(got.grad_input, input_format));
      CHECK(is_contiguous_in(got.grad_weight, weight_format));
    }
  }
}

int64_t workspace_bytes_now() {
  return memory::snapshot(Device::cuda()).category(MemoryCategory::Workspace).current;
}
int64_t workspace_bytes_peak() {
  return memory::snapshot(Device::cuda()).category(MemoryCategory::Workspace).peak;
}

// conv2d beside a branch on CUDA (tests/autograd/branch_sum.h) against float64 on the
// CPU: the input gradient is summed in the branch's buffer, and right, on the current path.
void check_branch_sum(DType dtype, double tolerance, uint64_t seed) {
  for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    for (const Config& config : configs()) {
      const Tensor input = normal(config.input, dtype, ++seed), weight = normal(config.weight, dtype, ++seed);
      const Tensor scale = normal(config.input, dtype, ++seed);
      const Tensor cpu_weight = converted_copy(weight, DType::Float64, Device::cpu());
      const Shape out_sizes = conv2d(converted_copy(input, DType::Float64, Device::cpu()), cpu_weight, {},
                                     config.options).sizes();
      const Tensor upstream = normal(out_sizes, dtype, ++seed);
      const Tensor expected = add(mg_test::conv_input_gradient(converted_copy(input, DType::Float64, Device::cpu()),
                                                               cpu_weight,
                                                               converted_copy(upstream, DType::Float64, Device::cpu()),
                                                               config.options),
                                  converted_copy(scale, DType::Float64, Device::cpu()));
      auto on_device = [&](const Tensor& values) {
        return contiguous_copy(converted_copy(values, dtype, Device::cuda()), format);
      };
      Tensor x = on_device(input).requires_grad_();
      mg_test::BranchSum got = mg_test::conv_beside_branch(x, on_device(weight), on_device(upstream), on_device(scale),
                                                           config.options, /*keep=*/false, format);
      INFO(dtype << (format == MemoryFormat::ChannelsLast ? ", channels_last" : ", NCHW") << ", input "
                 << config.input << " weight " << config.weight << " groups " << config.options.groups << ", cuDNN "
                 << (cuda::cudnn_enabled() ? "on" : "off") << ", benchmark " << cuda::cudnn_benchmark());
      CHECK(got.summed_in_branch_buffer);
      CHECK(relative_error(got.grad_of_x, expected) <= tolerance);
    }
  }
}

}  // namespace

TEST_CASE("conv2d on CUDA through im2col + cuBLAS (cuDNN off) matches the CPU, NCHW and channels_last", "[cuda]") {
  ConvSettings settings(/*enabled=*/false, /*benchmark=*/false, /*allow_tf32=*/false);
  check_against_cpu(DType::Float32, 1e-4, 100);
  check_against_cpu(DType::Float64, 1e-10, 200);
}

TEST_CASE("conv2d on CUDA adds its input gradient into another branch's, as the CPU computes it", "[cuda]") {
  SECTION("im2col + cuBLAS") {
    ConvSettings settings(/*enabled=*/false, /*benchmark=*/false, /*allow_tf32=*/false);
    check_branch_sum(DType::Float32, 1e-4, 1100);
    check_branch_sum(DType::Float16, 1e-2, 1200);
  }
#if MG_WITH_CUDNN
  SECTION("cuDNN, beta = 1: heuristics and benchmark mode (whose timing runs must not add to the gradient)") {
    for (bool benchmark : {false, true}) {
      ConvSettings settings(/*enabled=*/true, benchmark, /*allow_tf32=*/false);
      check_branch_sum(DType::Float32, 1e-4, 1300);
      check_branch_sum(DType::Float16, 1e-2, 1400);
      check_branch_sum(DType::BFloat16, 3e-2, 1500);
      check_branch_sum(DType::Float64, 1e-10, 1600);
    }
  }
#endif
}

#if MG_WITH_CUDNN

TEST_CASE("cuDNN settings default as in PyTorch", "[cuda][cudnn]") {
  CHECK(cuda::cudnn_is_available());
  CHECK(cuda::cudnn_enabled());
  CHECK_FALSE(cuda::cudnn_benchmark());
  CHECK(cuda::cudnn_allow_tf32());  // unlike matmul's set_allow_tf32, on by default
  CHECK_FALSE(cuda::cudnn_deterministic());
}

TEST_CASE("cuDNN conv2d in deterministic mode gives the same bits on every run", "[cuda][cudnn]") {
  // Large enough that cuDNN's fastest backward-filter engines split the sum over N*H*W
  // across blocks (the nondeterministic ones add their partials with atomics).
  const Shape input_shape{32, 64, 28, 28}, weight_shape{64, 64, 3, 3};
  for (DType dtype : {DType::Float32, DType::Float16}) {
    for (bool benchmark : {false, true}) {
      ConvSettings settings(/*enabled=*/true, benchmark, /*allow_tf32=*/true, /*deterministic=*/true);
      INFO(dtype << ", benchmark " << benchmark);
      Tensor input = normal(input_shape, dtype, 4001), weight = normal(weight_shape, dtype, 4002);
      Tensor bias = normal({weight_shape[0]}, dtype, 4003);
      const Layouts layouts = dtype == DType::Float16 ? Layouts::ChannelsLast : Layouts::Nchw;
      auto once = [&] {
        return run(input, weight, bias, {.padding = {1, 1}}, dtype, layouts, Device::cuda(), dtype, 4004);
      };
      const ConvResult first = once(), second = once();
      CHECK(host_values(second.output) == host_values(first.output));
      CHECK(host_values(second.grad_input) == host_values(first.grad_input));
      CHECK(host_values(second.grad_weight) == host_values(first.grad_weight));
    }
  }
}

TEST_CASE("cuDNN conv2d in float32 without TF32 matches the CPU: heuristics and benchmark", "[cuda][cudnn]") {
  for (bool benchmark : {false, true}) {
    ConvSettings settings(/*enabled=*/true, benchmark, /*allow_tf32=*/false);
    // FFT and Winograd algorithms transform the operands in float32: a little more
    // rounding than a direct sum, hence 2e-4 rather than im2col's 1e-4.
    check_against_cpu(DType::Float32, 2e-4, 300);
  }
}

TEST_CASE("cuDNN conv2d in float32 with TF32 (the default) stays within TF32 accuracy", "[cuda][cudnn]") {
  for (bool benchmark : {false, true}) {
    ConvSettings settings(/*enabled=*/true, benchmark, /*allow_tf32=*/true);
    // TF32 keeps 10 mantissa bits of each factor: products carry ~5e-4 relative error.
    check_against_cpu(DType::Float32, 5e-3, 400);
  }
}

TEST_CASE("cuDNN conv2d in float64 matches the CPU (channels_last runs through NCHW)", "[cuda][cudnn]") {
  for (bool benchmark : {false, true}) {
    ConvSettings settings(/*enabled=*/true, benchmark, /*allow_tf32=*/true);
    check_against_cpu(DType::Float64, 1e-10, 500);
  }
}

TEST_CASE("cuDNN conv2d in float16 and bfloat16 matches the CPU within their precision", "[cuda][cudnn]") {
  for (bool benchmark : {false, true}) {
    ConvSettings settings(/*enabled=*/true, benchmark, /*allow_tf32=*/true);
    // Accumulation is float32; the error is the final rounding to 11 (float16) or 8
    // (bfloat16) mantissa bits, plus tensor-core summation order.
    check_against_cpu(DType::Float16, 1e-2, 600);
    check_against_cpu(DType::BFloat16, 3e-2, 700);
  }
}

TEST_CASE("cuDNN and im2col agree on the same device tensors", "[cuda][cudnn]") {
  uint64_t seed = 800;
  for (Layouts layouts : {Layouts::Nchw, Layouts::ChannelsLast}) {
    for (const Config& config : configs()) {
      Tensor input = normal(config.input, DType::Float32, ++seed);
      Tensor weight = normal(config.weight, DType::Float32, ++seed);
      Tensor bias = normal({config.weight[0]}, DType::Float32, ++seed);
      uint64_t upstream_seed = ++seed;
      auto on_path = [&](bool cudnn) {
        ConvSettings settings(cudnn, /*benchmark=*/false, /*allow_tf32=*/false);
        return run(input, weight, bias, config.options, DType::Float32, layouts, Device::cuda(), DType::Float32,
                   upstream_seed);
      };
      ConvResult im2col = on_path(false), cudnn = on_path(true);
      INFO(layouts_name(layouts) << ", input " << config.input << " weight " << config.weight);
      CHECK(relative_error(cudnn.output, im2col.output) <= 1e-5);
      CHECK(relative_error(cudnn.grad_input, im2col.grad_input) <= 1e-5);
      CHECK(relative_error(cudnn.grad_weight, im2col.grad_weight) <= 1e-5);
      CHECK(relative_error(cudnn.grad_bias, im2col.grad_bias) <= 1e-5);
    }
  }
}

TEST_CASE("cuDNN borrows its workspace as WORKSPACE for the call and returns it", "[cuda][cudnn]") {
  // NCHW float32 throughout, so the only WORKSPACE a call allocates is cuDNN's own.
  Tensor input = converted_copy(normal({8, 32, 28, 28}, DType::Float32, 901), DType::Float32, Device::cuda());
  Tensor weight = converted_copy(normal({64, 32, 3, 3}, DType::Float32, 902), DType::Float32, Device::cuda());
  Tensor expected = conv2d(converted_copy(input, DType::Float64, Device::cpu()),
                           converted_copy(weight, DType::Float64, Device::cpu()), {}, {.padding = {1, 1}});
  NoGradGuard no_grad;
  cuda::synchronize();

  auto forward = [&] {
    cuda::synchronize();
    int64_t before = workspace_bytes_now();
    memory::reset_peak_stats(Device::cuda());
    Tensor out = conv2d(input, weight, {}, {.padding = {1, 1}});
    cuda::synchronize();
    CHECK(workspace_bytes_now() == before);  // returned when the call ended
    CHECK(relative_error(out, expected) <= 1e-4);
    return workspace_bytes_peak() - before;
  };
  auto chosen_workspace = [] {
    std::vector<cuda::CudnnAlgorithmChoice> choices = cuda::cudnn_algorithm_choices();
    REQUIRE(choices.size() == 1);
    CHECK(choices[0].direction == cuda::ConvDirection::Forward);
    return static_cast<int64_t>(choices[0].workspace_bytes);
  };

  SECTION("benchmark: the timing run borrows the most, every later call exactly the chosen workspace") {
    ConvSettings settings(/*enabled=*/true, /*benchmark=*/true, /*allow_tf32=*/false);
    cuda::clear_cudnn_algorithm_cache();
    int64_t first_peak = forward();
    int64_t workspace = chosen_workspace();
    INFO("timing run peak " << first_peak << ", chosen algorithm's workspace " << workspace);
    CHECK(first_peak > 0);  // some candidate (FFT, Winograd) needs scratch: it was lent
    CHECK(first_peak >= workspace);
    CHECK(forward() == workspace);  // cache hit: only the chosen algorithm's bytes
  }
  SECTION("heuristics: the chosen workspace, within the limit") {
    ConvSettings settings(/*enabled=*/true, /*benchmark=*/false, /*allow_tf32=*/false);
    cuda::clear_cudnn_algorithm_cache();
    int64_t peak = forward();
    int64_t workspace = chosen_workspace();
    CHECK(peak == workspace);
    CHECK(workspace <= static_cast<int64_t>(cuda::cudnn_workspace_limit()));
    CHECK(forward() == workspace);
  }
  SECTION("a zero limit forces an algorithm without workspace") {
    ConvSettings settings(/*enabled=*/true, /*benchmark=*/false, /*allow_tf32=*/false);
    cuda::set_cudnn_workspace_limit(0);
    cuda::clear_cudnn_algorithm_cache();
    CHECK(forward() == 0);
    CHECK(chosen_workspace() == 0);
  }
  cuda::clear_cudnn_algorithm_cache();
}

TEST_CASE("cuDNN caches the algorithm per shape, layout, dtype, math and mode", "[cuda][cudnn]") {
  ConvSettings settings(/*enabled=*/true, /*benchmark=*/false, /*allow_tf32=*/false);
  NoGradGuard no_grad;
  auto forward = [](const Shape& input_sizes, MemoryFormat format, DType dtype, uint64_t seed) {
    Tensor input = contiguous_copy(converted_copy(normal(input_sizes, DType::Float32, seed), dtype, Device::cuda()),
                                   format);
    Tensor weight = converted_copy(normal({8, input_sizes[1], 3, 3}, DType::Float32, seed + 1), dtype, Device::cuda());
    return conv2d(input, weight, {}, {.padding = {1, 1}});
  };
  cuda::clear_cudnn_algorithm_cache();
  REQUIRE(cuda::cudnn_algorithm_cache_size() == 0);

  Tensor first = forward({2, 4, 10, 10}, MemoryFormat::Contiguous, DType::Float32, 1001);
  CHECK(cuda::cudnn_algorithm_cache_size() == 1);
  // Same shape, fresh values: a hit, and the same answer as a fresh choice would give.
  Tensor again = forward({2, 4, 10, 10}, MemoryFormat::Contiguous, DType::Float32, 1001);
  CHECK(cuda::cudnn_algorithm_cache_size() == 1);
  CHECK(relative_error(again, first) == 0.0);
  forward({2, 4, 10, 10}, MemoryFormat::Contiguous, DType::Float32, 1003);
  CHECK(cuda::cudnn_algorithm_cache_size() == 1);

  forward({3, 4, 10, 10}, MemoryFormat::Contiguous, DType::Float32, 1005);  // another batch size
  CHECK(cuda::cudnn_algorithm_cache_size() == 2);
  forward({2, 4, 10, 10}, MemoryFormat::ChannelsLast, DType::Float32, 1007);  // another layout
  CHECK(cuda::cudnn_algorithm_cache_size() == 3);
  forward({2, 4, 10, 10}, MemoryFormat::Contiguous, DType::Float16, 1009);  // another dtype
  CHECK(cuda::cudnn_algorithm_cache_size() == 4);
  cuda::set_cudnn_allow_tf32(true);  // another math mode
  forward({2, 4, 10, 10}, MemoryFormat::Contiguous, DType::Float32, 1011);
  CHECK(cuda::cudnn_algorithm_cache_size() == 5);
  cuda::set_cudnn_benchmark(true);  // another choosing mode
  forward({2, 4, 10, 10}, MemoryFormat::Contiguous, DType::Float32, 1013);
  CHECK(cuda::cudnn_algorithm_cache_size() == 6);

  // Backward adds one entry per direction that runs.
  cuda::set_cudnn_benchmark(false);
  cuda::set_cudnn_allow_tf32(false);
  {
    EnableGradGuard grad;
    Tensor input = converted_copy(normal({2, 4, 10, 10}, DType::Float32, 1015), DType::Float32, Device::cuda());
    Tensor weight = converted_copy(normal({8, 4, 3, 3}, DType::Float32, 1016), DType::Float32, Device::cuda());
    input.requires_grad_();
    weight.requires_grad_();
    sum(conv2d(input, weight, {}, {.padding = {1, 1}})).backward();
  }
  CHECK(cuda::cudnn_algorithm_cache_size() == 8);  // forward was cached above; + data, + filter
  cuda::clear_cudnn_algorithm_cache();
  CHECK(cuda::cudnn_algorithm_cache_size() == 0);
}

#endif  // MG_WITH_CUDNN
