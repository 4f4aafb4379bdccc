// tests/cuda/test_cuda_dgrad_batch_norm.cpp — the convolution's backward data with the
// ReLU's backward and batch norm's backward sums in its epilogue (cuda/cudnn/conv.h's
// conv2d_backward_input_relu_batch_norm: cuDNN's DgradDreluBNBwdWeight graph): on
// ResNet-50's shapes in float16 and bfloat16 channels_last, what it writes gives batch
// norm's input, weight and bias the gradients that memgrad's unfused composition
// (batch_norm_relu, then conv2d, differentiated by autograd) gives them; what it refuses it
// refuses without writing. Through autograd (conv2d's node handing the sums to
// batch_norm_relu's, autograd/relu_batch_norm_node.h): the same gradients with the fusion
// on and off, the Recorder naming the one-pass backward, and no fusion where the
// activation has a second consumer or a channel has too few values. The one-pass
// grad_input from the handed coefficients against the CPU kernel. A hidden case
// ("[fusion-timing]") times the fused call against the plain backward data and batch
// norm's own backward, the two launches it would replace.
#include <catch2/catch.hpp>

#if MG_WITH_CUDNN

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/norm.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/cudnn/algorithm_cache.h"
#include "memgrad/cuda/cudnn/conv.h"
#include "memgrad/cuda/cudnn/settings.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/runtime.h"
#include "memgrad/memory/recorder.h"
#include "cuda/conv_fusion_checks.h"
#include "cuda/gpu_timing.h"

using namespace mg;
using namespace conv_fusion_checks;

namespace {

constexpr double kEps = 1e-5;

// A convolution that reads relu(batch_norm(z)): z has in_channels channels at size x size.
using Case = ConvShape;

// ResNet-50's convolutions after a batch norm + ReLU: a Bottleneck's 3x3 (also strided)
// and its last 1x1, at a small batch.
const std::vector<Case> kCases = {
    {"3x3, 64 -> 64 at 56x56", 4, 64, 64, 56, 3, 1},
    {"1x1, 64 -> 256 at 56x56", 4, 64, 256, 56, 1, 1},
    {"3x3 stride 2, 128 -> 128 at 56x56", 4, 128, 128, 56, 3, 2},
    {"1x1, 256 -> 1024 at 14x14", 4, 256, 1024, 14, 1, 1},
    {"3x3, 512 -> 512 at 7x7", 4, 512, 512, 7, 3, 1},
};

const TensorOptions kSingle{.dtype = DType::Float32, .device = Device::cuda()};

// `values` within `tolerance` of the largest |reference|, which must not be negligible.
void check_close(const char* what, const Tensor& values, const Tensor& reference, double tolerance) {
  const std::vector<double> got = host_doubles(values), want = host_doubles(reference);
  REQUIRE(got.size() == want.size());
  double largest = 0.0, worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    largest = std::max(largest, std::abs(want[i]));
    const double difference = std::abs(got[i] - want[i]);
    if (!(difference <= worst)) {  // NaN counts as the worst
      worst = std::isnan(difference) ? INFINITY : difference;
      worst_at = i;
    }
  }
  INFO(what << ": largest |reference| " << largest << ", largest difference " << worst << " at " << worst_at << " ("
            << got[worst_at] << " against " << want[worst_at] << ")");
  REQUIRE(largest > 1e-3);
  CHECK(worst <= tolerance * largest);
}

// Batch norm's operands: weight ~ 1 + N(0, 0.2^2) and bias ~ N(0, 0.5^2), every fourth
// channel's bias at -2 so that its ReLU blocks most values (the mask matters), and the
// batch's mean and invstd of z computed here in float32.
struct Normalization {
  Tensor weight, bias, mean, invstd;
};
Normalization normalization_of(const Tensor& z, uint64_t seed) {
  const int64_t channels = z.size(1);
  Tensor weight = add(random_on_gpu({channels}, 0.2, seed, DType::Float32), 1.0);
  std::vector<float> biases = converted_copy(random_on_gpu({channels}, 0.5, seed + 1, DType::Float32), DType::Float32,
                                             Device::cpu())
                                  .to_vector<float>();
  for (size_t c = 0; c < biases.size(); c += 4) biases[c] = -2.0f;
  Tensor bias = converted_copy(from_vector(biases, {channels}), DType::Float32, Device::cuda());
  const Tensor values = converted_copy(z, DType::Float32, Device::cuda());
  const Tensor mean = mg::mean(values, {0, 2, 3});
  const Tensor centered = sub(values, view(mean, {1, channels, 1, 1}));
  const Tensor variance = mg::mean(mul(centered, centered), {0, 2, 3});
  return {weight, bias, mean, rdiv(1.0, sqrt(add(variance, kEps)))};
}

cuda::cudnn::BatchNormGradients nan_gradients(int64_t channels) {
  auto nans = [&] { return full({channels}, std::nan(""), kSingle); };
  return {nans(), nans(), nans(), nans(), nans()};
}

// The unfused composition differentiated by autograd: z's, the weight's and the bias's
// gradients when conv2d(relu(batch_norm(z)), w) receives `grad_output`.
struct Reference {
  Tensor grad_input, grad_weight, grad_bias;
};
Reference unfused_backward(const Tensor& z, const Normalization& norm, const Tensor& w, const Tensor& grad_output,
                           const Case& shape) {
  const Tensor input = z.detach(), weight = norm.weight.detach(), bias = norm.bias.detach();
  for (const Tensor* leaf : {&input, &weight, &bias}) leaf->requires_grad_();
  const Tensor activation = batch_norm_relu(input, {}, {}, weight, bias, /*training=*/true, 0.1, kEps);
  conv2d(activation, w, {}, shape.options()).backward(grad_output);
  return {input.grad(), weight.grad(), bias.grad()};
}

}  // namespace

TEST_CASE("cuDNN's backward data with the ReLU's backward and batch norm's sums: the unfused gradients",
          "[cuda][cudnn][fusion]") {
  const BackwardFusionSwitch fusion(true);
  const DType dtype = GENERATE(DType::Float16, DType::BFloat16);
  const MemoryFormat layout = MemoryFormat::ChannelsLast;
  for (const Case& shape : kCases) {
    INFO(shape.name << ", " << dtype);
    const Tensor z = add(random_on_gpu(shape.input(), 1.5, 41, dtype, layout), 0.5);
    const Normalization norm = normalization_of(z, 43);
    const double fan_in = static_cast<double>(shape.in_channels * shape.kernel * shape.kernel);
    const Tensor w = random_on_gpu(shape.weight(), 1.0 / std::sqrt(fan_in), 45, dtype, layout);
    const Tensor grad_output = random_on_gpu(shape.output(), 1.0, 47, dtype, layout);

    cuda::clear_cudnn_algorithm_cache();
    Tensor grad_normalized = empty(shape.input(), {.dtype = dtype, .device = Device::cuda()}, layout);
    const cuda::cudnn::BatchNormGradients gradients = nan_gradients(shape.in_channels);
    bool fused = false;
    {
      NoGradGuard no_grad;
      fused = cuda::cudnn::conv2d_backward_input_relu_batch_norm(
          grad_output, w, shape.window(), {z, norm.mean, norm.invstd, norm.weight, norm.bias}, grad_normalized,
          gradients);
    }
    std::string engine = "nothing cached";
    for (const cuda::CudnnAlgorithmChoice& choice : cuda::cudnn_algorithm_choices()) {
      if (choice.direction != cuda::ConvDirection::BackwardDataReluBatchNorm) continue;
      engine = choice.engine < 0 ? "no engine"
                                 : "engine " + std::to_string(choice.engine) + ", workspace " +
                                       std::to_string(choice.workspace_bytes) + " bytes";
    }
    WARN(dtype << ", " << shape.name << ": " << (fused ? "fused, " : "refused, ") << engine);
    if (!fused) {
      CHECK(std::isnan(host_doubles(gradients.grad_weight)[0]));  // refused means untouched
      continue;
    }
    const Reference reference = unfused_backward(z, norm, w, grad_output, shape);
    NoGradGuard no_grad;
    const Shape per_channel{1, shape.in_channels, 1, 1};
    const Tensor grad_input =
        add(add(mul(view(gradients.grad_scale, per_channel), converted_copy(grad_normalized, DType::Float32, Device::cuda())),
                mul(view(gradients.input_scale, per_channel), converted_copy(z, DType::Float32, Device::cuda()))),
            view(gradients.offset, per_channel));
    // Both sides round the data gradient to 16 bits before batch norm's sums, in different
    // orders: a few units in the last place of the largest gradient.
    const double tolerance = dtype == DType::BFloat16 ? 4e-2 : 1e-2;
    check_close("grad of batch norm's weight", gradients.grad_weight, reference.grad_weight, tolerance);
    check_close("grad of batch norm's bias", gradients.grad_bias, reference.grad_bias, tolerance);
    check_close("grad of batch norm's input", grad_input, reference.grad_input, tolerance);
  }
}

TEST_CASE("the fused backward data with batch norm names what breaks its contract, and refuses when off",
          "[cuda][cudnn][fusion]") {
  NoGradGuard no_grad;
  const BackwardFusionSwitch fusion(true);
  const Case shape{"3x3", 2, 16, 16, 8, 3, 1};
  const MemoryFormat layout = MemoryFormat::ChannelsLast;
  const Tensor z = random_on_gpu(shape.input(), 1.0, 3, DType::Float16, layout);
  const Normalization norm = normalization_of(z, 5);
  const Tensor w = random_on_gpu(shape.weight(), 0.1, 7, DType::Float16, layout);
  const Tensor grad_output = random_on_gpu(shape.output(), 1.0, 9, DType::Float16, layout);
  const Tensor grad_normalized = empty(shape.input(), {.dtype = DType::Float16, .device = Device::cuda()}, layout);
  const cuda::cudnn::BatchNormGradients gradients = nan_gradients(shape.in_channels);
  auto call = [&](const Tensor& input, const Tensor& mean) {
    return cuda::cudnn::conv2d_backward_input_relu_batch_norm(
        grad_output, w, shape.window(), {input, mean, norm.invstd, norm.weight, norm.bias}, grad_normalized,
        gradients);
  };
  SECTION("a float16 mean") {
    const Tensor half_mean = converted_copy(norm.mean, DType::Float16, Device::cuda());
    CHECK_THROWS_WITH(call(z, half_mean), Catch::Contains("mean must be (16) float32"));
  }
  SECTION("batch norm's input in NCHW") {
    const Tensor nchw = contiguous_copy(z, MemoryFormat::Contiguous);
    CHECK_THROWS_WITH(call(nchw, norm.mean), Catch::Contains("batch norm's input is float16 [2, 16, 8, 8]"));
  }
  SECTION("fusion switched off") {
    const BackwardFusionSwitch off(false);
    CHECK_FALSE(call(z, norm.mean));
  }
  CHECK(std::isnan(host_doubles(gradients.grad_weight)[0]));
  CHECK(std::isnan(host_doubles(gradients.offset)[0]));
}

TEST_CASE("batch norm's grad_input from coefficients: the CUDA kernel against the CPU's", "[cuda][batch_norm]") {
  const DType dtype = GENERATE(DType::Float16, DType::BFloat16, DType::Float32, DType::Float64);
  const MemoryFormat layout = GENERATE(MemoryFormat::Contiguous, MemoryFormat::ChannelsLast);
  INFO(dtype << ", " << layout);
  const Shape sizes{3, 24, 5, 7};
  const Tensor grad = random_on_gpu(sizes, 1.0, 51, dtype, layout), input = random_on_gpu(sizes, 1.0, 53, dtype, layout);
  const Tensor coefficients = random_on_gpu({3, 24}, 1.0, 55, DType::Float32);
  const Tensor on_gpu = empty(sizes, {.dtype = dtype, .device = Device::cuda()}, layout);
  kernels(Device::cuda()).batch_norm_backward_from_coefficients(grad, input, coefficients, on_gpu);
  auto to_cpu = [&](const Tensor& tensor) { return contiguous_copy(tensor.to(Device::cpu()), layout); };
  const Tensor on_cpu = empty(sizes, {.dtype = dtype}, layout);
  kernels(Device::cpu()).batch_norm_backward_from_coefficients(to_cpu(grad), to_cpu(input),
                                                               coefficients.to(Device::cpu()), on_cpu);
  // float32 arithmetic on the GPU, double on the CPU, each rounded once to the dtype.
  const double tolerance = dtype == DType::Float64 ? 1e-6 : dtype == DType::Float32 ? 1e-5 : 1e-2;
  check_close("grad_input", on_gpu, on_cpu, tolerance);
}

namespace {

// conv2d(relu(batch_norm(z))) in training, float16 channels_last, differentiated with
// cuDNN's backward fusion on or off; `shared` makes the activation a second consumer's
// input too; `batch` sets how many values a channel has (48 x 48 each).
struct ChainGradients {
  Tensor z, weight, bias, conv_weight;
  bool fused;  // the fused backward data ran (its plan is cached, with an engine)
  int64_t one_pass_allocations;  // the Recorder's allocations by batch norm's one-pass backward
};
ChainGradients chain_backward(bool fusion, bool shared, int64_t batch = 32) {
  const BackwardFusionSwitch scope(fusion);
  cuda::clear_cudnn_algorithm_cache();
  // 73,728 values a channel: above the size below which the kernel table does not fuse.
  const Case shape{"3x3, 32 -> 64 at 48x48", batch, 32, 64, 48, 3, 1};
  const MemoryFormat layout = MemoryFormat::ChannelsLast;
  const Tensor z = add(random_on_gpu(shape.input(), 1.5, 61, DType::Float16, layout), 0.5);
  const Normalization norm = normalization_of(z, 63);
  const Tensor w = random_on_gpu(shape.weight(), 0.05, 65, DType::Float16, layout);
  const Tensor grad_output = random_on_gpu(shape.output(), 1.0, 67, DType::Float16, layout);
  const Tensor input = z.detach(), weight = norm.weight.detach(), bias = norm.bias.detach(), conv_weight = w.detach();
  for (const Tensor* leaf : {&input, &weight, &bias, &conv_weight}) leaf->requires_grad_();
  const Tensor activation = batch_norm_relu(input, {}, {}, weight, bias, /*training=*/true, 0.1, kEps);
  const Tensor out = conv2d(activation, conv_weight, {}, shape.options());
  memory::Recorder recorder({.device = Device::cuda()});
  recorder.start();
  if (shared) {
    autograd::backward({out, activation}, {grad_output, mul(ones_like(activation), 0.25)});
  } else {
    out.backward(grad_output);
  }
  recorder.stop();
  const std::vector<memory::MemoryEvent> events = recorder.timeline().events;
  const int64_t one_pass_allocations = std::count_if(events.begin(), events.end(), [](const memory::MemoryEvent& event) {
    return event.kind == memory::EventKind::Allocate && event.op == "BatchNormReluBackward[from the convolution's sums]";
  });
  bool fused = false;
  for (const cuda::CudnnAlgorithmChoice& choice : cuda::cudnn_algorithm_choices()) {
    fused = fused || (choice.direction == cuda::ConvDirection::BackwardDataReluBatchNorm && choice.engine >= 0);
  }
  return {input.grad(), weight.grad(), bias.grad(), conv_weight.grad(), fused, one_pass_allocations};
}

}  // namespace

TEST_CASE("conv2d after batch_norm_relu: the fused backward's gradients are the unfused ones", "[cuda][cudnn][fusion]") {
  const ChainGradients unfused = chain_backward(false, false);
  CHECK_FALSE(unfused.fused);
  CHECK(unfused.one_pass_allocations == 0);
  const ChainGradients fused = chain_backward(true, false);
  CHECK(fused.fused);  // float16 fused on the H200 (cuDNN 9.14) at every shape tried
  CHECK(fused.one_pass_allocations >= 1);  // the Recorder names the path: grad_input's buffer
  check_close("grad of batch norm's input", fused.z, unfused.z, 1e-2);
  check_close("grad of batch norm's weight", fused.weight, unfused.weight, 1e-2);
  check_close("grad of batch norm's bias", fused.bias, unfused.bias, 1e-2);
  check_close("grad of the convolution's weight", fused.conv_weight, unfused.conv_weight, 1e-3);
}

TEST_CASE("conv2d after batch_norm_relu: a second consumer of the activation keeps the backward unfused",
          "[cuda][cudnn][fusion]") {
  const ChainGradients unfused = chain_backward(false, true);
  const ChainGradients with_fusion_on = chain_backward(true, true);
  CHECK_FALSE(with_fusion_on.fused);  // the sums would miss the other consumer's gradient
  CHECK(with_fusion_on.one_pass_allocations == 0);
  check_close("grad of batch norm's input", with_fusion_on.z, unfused.z, 1e-6);
  check_close("grad of batch norm's bias", with_fusion_on.bias, unfused.bias, 1e-6);
}

TEST_CASE("conv2d after batch_norm_relu: too few values a channel to pay keep the backward unfused",
          "[cuda][cudnn][fusion]") {
  const ChainGradients small = chain_backward(true, false, /*batch=*/8);  // 18,432 values a channel
  CHECK_FALSE(small.fused);
}

// Run by hand (and by scripts/gpu-check's fusion-timing stage): at batch 128 in float16, the
// fused call against what it would replace, the plain backward data plus memgrad's batch
// norm + ReLU backward (its sums, their finish and the grad_input pass). The fused path
// still needs a grad_input pass (grad z from the coefficients): about 3/5 of the bytes of
// batch norm's backward.
TEST_CASE("fused backward data with batch norm: time against the plain backward data and batch norm's backward",
          "[.][fusion-timing]") {
  NoGradGuard no_grad;
  const BackwardFusionSwitch fusion(true);
  std::ostringstream table;
  table << "shape (batch 128, float16 channels_last): fused ms | backward data ms | batch norm + ReLU backward ms\n";
  const MemoryFormat layout = MemoryFormat::ChannelsLast;
  const TensorOptions half{.dtype = DType::Float16, .device = Device::cuda()};
  for (const Case& shape : kResNet50AfterBatchNormRelu) {
    const Tensor z = random_on_gpu(shape.input(), 1.0, 13, DType::Float16, layout);
    const Normalization norm = normalization_of(z, 15);
    const Tensor w = random_on_gpu(shape.weight(), 0.05, 17, DType::Float16, layout);
    const Tensor grad_output = random_on_gpu(shape.output(), 1.0, 19, DType::Float16, layout);
    const Tensor grad_normalized = empty(shape.input(), half, layout), grad_input = empty(shape.input(), half, layout);
    const cuda::cudnn::BatchNormGradients gradients = nan_gradients(shape.in_channels);
    bool fused = true;
    const double fused_ms = gpu_timing::median_ms([&] {
      fused = cuda::cudnn::conv2d_backward_input_relu_batch_norm(
          grad_output, w, shape.window(), {z, norm.mean, norm.invstd, norm.weight, norm.bias}, grad_normalized,
          gradients);
    });
    const double dgrad_ms = gpu_timing::median_ms(
        [&] { cuda::cudnn::conv2d_backward_input(grad_output, w, shape.window(), grad_normalized, false); });
    const double norm_ms = gpu_timing::median_ms([&] {
      cuda::batch_norm_backward(grad_normalized, z, norm.weight, norm.bias, norm.mean, norm.invstd, /*relu=*/true, {},
                                grad_input, gradients.grad_weight, gradients.grad_bias, {});
    });
    table << shape.name << ": " << (fused ? std::to_string(fused_ms) : std::string("refused")) << " | " << dgrad_ms
          << " | " << norm_ms << "\n";
  }
  WARN(table.str());
}

#endif  // MG_WITH_CUDNN
