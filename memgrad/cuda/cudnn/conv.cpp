// cuda/cudnn/conv.cpp — convolution through cuDNN (see conv.h).
//
// One call, in any direction:
// 1. Layout. The call runs in one layout for all three tensors (cuda/plan/conv_layout.h:
//    channels_last when any of them is, NCHW always for float64). An operand not dense in
//    that layout is copied into it; a result not dense in it is computed into a temporary
//    and copied back. Both are WORKSPACE and only happen for mixed layouts.
// 2. Plan. The key (cuda/cudnn/algorithm_cache.h) finds the cached execution plan; on a
//    miss one is chosen (cuda/cudnn/conv_engines.h: cuDNN's heuristics, or timing with
//    benchmark on).
// 3. Workspace. The plan's scratch memory is borrowed from the caching allocator as a
//    WORKSPACE tensor for the duration of the call and released when it returns, so it
//    shows in the WORKSPACE peak but not in steady state. The block goes back to the pool
//    of the current stream, where every kernel reading it was queued, so the allocator's
//    stream-ordered reuse makes the early release safe.
// The handle is the calling thread's for the device, bound to its current stream.
#include "memgrad/cuda/cudnn/conv.h"

#include <climits>
#include <cstdint>
#include <memory>
#include <utility>

#include "memgrad/core/factory.h"
#include "memgrad/cuda/cudnn/algorithm_cache.h"
#include "memgrad/cuda/cudnn/check.h"
#include "memgrad/cuda/cudnn/conv_engines.h"
#include "memgrad/cuda/cudnn/handle.h"
#include "memgrad/cuda/cudnn/settings.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/plan/conv_layout.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda::cudnn {

namespace {

// The largest power of two up to 16 dividing every pointer of the call: cuDNN's vectorised
// kernels need aligned data, so a choice made for aligned tensors must not serve offset
// views.
int alignment(const ConvOperands& data) {
  const BatchNormOperands& norm = data.batch_norm;
  uintptr_t bits = 0;
  for (void* pointer : {data.input, data.weight, data.output, data.sum, data.square_sum, data.scale, data.bias,
                        norm.input, norm.mean, norm.invstd, norm.weight, norm.bias, norm.grad_weight, norm.grad_bias,
                        norm.grad_scale, norm.input_scale, norm.offset}) {
    bits |= reinterpret_cast<uintptr_t>(pointer);
  }
  int result = 16;
  while (result > 1 && bits % static_cast<uintptr_t>(result) != 0) result /= 2;
  return result;
}

const ConvPlan& plan_for(cudnnHandle_t handle, Device device, const ConvProblem& problem, const ConvOperands& data) {
  const bool benchmark = cudnn_benchmark();
  const ConvKey key = make_conv_key(problem.direction, device, problem.dtype, problem.layout, problem.input,
                                    problem.weight, problem.output, problem.window, problem.allow_tf32, problem.deterministic, benchmark,
                                    problem.alignment);
  if (const ConvPlan* cached = find_conv_plan(key)) return *cached;
  std::unique_ptr<ConvPlan> plan = choose_conv_plan(handle, device, problem, benchmark, data);
  if (problem.direction == ConvDirection::Forward) {
    plan->output.emplace(problem.dtype, problem.output, problem.layout);
    plan->bias.emplace(problem.dtype, Shape{1, problem.output[1], 1, 1}, MemoryFormat::Contiguous);
  }
  return insert_conv_plan(key, std::move(plan));
}

// Runs `plan` on `data` with the plan's workspace borrowed for the call.
void run_with_workspace(cudnnHandle_t handle, Device device, const ConvPlan& plan, const ConvOperands& data) {
  Tensor workspace = borrow_workspace(plan.workspace_bytes, device);
  run_conv_plan(handle, plan, data, workspace.defined() ? workspace.raw_data() : nullptr);
}  // the workspace goes back to the cache here

// A fused direction's problem: 16-bit data dense in channels_last, without TF32 (which is
// float32's).
ConvProblem fused_problem(ConvDirection direction, const Tensor& input, const Tensor& weight, const Window2d& window,
                          const Tensor& output, const ConvOperands& data) {
  return {direction,      output.dtype(), MemoryFormat::ChannelsLast, input.sizes(),
          weight.sizes(), output.sizes(), window,                     /*allow_tf32=*/false,
          cudnn_deterministic(), alignment(data)};
}

// ---- layouts and dtypes ----

// `tensor` itself when dense in `layout`, else a WORKSPACE tensor in `layout` — holding
// tensor's values when `with_values` (an operand), uninitialised otherwise (a result).
Tensor in_layout(const Tensor& tensor, MemoryFormat layout, bool with_values) {
  if (!needs_layout_copy(tensor, layout)) return tensor;
  Tensor result =
      empty(tensor.sizes(), {.dtype = tensor.dtype(), .device = tensor.device(), .category = MemoryCategory::Workspace},
            layout);
  if (with_values) copy(tensor, result);
  return result;
}

// `tensor` itself when of `dtype`, else a WORKSPACE copy converted to it.
Tensor in_dtype(const Tensor& tensor, DType dtype) {
  if (tensor.dtype() == dtype) return tensor;
  Tensor result =
      empty(tensor.sizes(), {.dtype = dtype, .device = tensor.device(), .category = MemoryCategory::Workspace});
  copy(tensor, result);
  return result;
}

// ---- the contracts of the fused calls with per-channel operands ----

// (channels) float32 contiguous on `device`: one coefficient or sum per channel of `of`.
void check_per_channel(const char* op, const char* name, const Tensor& tensor, int64_t channels, const char* of,
                       Device device) {
  MG_CHECK(tensor.dtype() == DType::Float32 && tensor.dim() == 1 && tensor.size(0) == channels &&
               tensor.is_contiguous() && tensor.device() == device,
           op, ": ", name, " must be (", channels, ") float32, contiguous, on ", device, ": one value per channel of ",
           of, "; got ", tensor.dtype(), " ", tensor.sizes(), " on ", tensor.device(),
           tensor.is_contiguous() ? "" : " (not contiguous)", ".");
}

// x, w and y of one convolution: 4-D, 16-bit, all of x's dtype and on y's device, dense in
// channels_last, with sizes that fit.
void check_fused_convolution(const char* op, const char* unfused, const Tensor& input, const Tensor& weight,
                             const Window2d& window, const Tensor& output) {
  const DType dtype = input.dtype();
  const Device device = output.device();
  MG_CHECK(is_16_bit_float(dtype), op, ": input is ", dtype,
           "; the fusion takes float16 or bfloat16. Hint: run ", unfused, " apart.");
  for (const auto& [name, tensor] : {std::pair{"input", &input}, {"weight", &weight}, {"output", &output}}) {
    MG_CHECK(tensor->dim() == 4 && tensor->dtype() == dtype && tensor->device() == device &&
                 !needs_layout_copy(*tensor, MemoryFormat::ChannelsLast),
             op, ": ", name, " is ", tensor->dtype(), " ", tensor->sizes(), " (strides ", tensor->strides(), ") on ",
             tensor->device(), "; input, weight and output must be 4-D ", dtype, " on ", device,
             ", dense in channels_last. Hint: contiguous_copy(tensor, MemoryFormat::ChannelsLast).");
  }
  MG_CHECK(weight.size(1) * window.groups == input.size(1) && weight.size(0) == output.size(1) &&
               output.size(0) == input.size(0),
           op, ": input ", input.sizes(), ", weight ", weight.sizes(), " (groups ", window.groups, ") and output ",
           output.sizes(), " do not fit one convolution.");
}

void check_normalized_convolution(const Tensor& input, const Tensor& scale, const Tensor& bias, const Tensor& weight,
                                  const Window2d& window, const Tensor& output, const Tensor& sum,
                                  const Tensor& square_sum) {
  constexpr const char* op = "conv2d_normalized_with_statistics";
  check_fused_convolution(op, "batch_norm_relu and conv2d", input, weight, window, output);
  const int64_t channels = input.size(1), out_channels = output.size(1);
  const Device device = output.device();
  check_per_channel(op, "scale", scale, channels, "the input", device);
  check_per_channel(op, "bias", bias, channels, "the input", device);
  check_per_channel(op, "sum", sum, out_channels, "the output", device);
  check_per_channel(op, "square_sum", square_sum, out_channels, "the output", device);
}

// grad_normalized plays x's part in the convolution; z must match it.
void check_relu_batch_norm_backward(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                                    const BatchNormSaved& saved, const Tensor& grad_normalized,
                                    const BatchNormGradients& gradients) {
  constexpr const char* op = "conv2d_backward_input_relu_batch_norm";
  check_fused_convolution(op, "conv2d_backward_input and batch_norm_backward", grad_normalized, weight, window,
                          grad_output);
  MG_CHECK(saved.input.sizes() == grad_normalized.sizes() && saved.input.dtype() == grad_normalized.dtype() &&
               saved.input.device() == grad_normalized.device() &&
               !needs_layout_copy(saved.input, MemoryFormat::ChannelsLast),
           op, ": batch norm's input is ", saved.input.dtype(), " ", saved.input.sizes(), " (strides ",
           saved.input.strides(), ") on ", saved.input.device(), "; it must match grad_normalized, ",
           grad_normalized.dtype(), " ", grad_normalized.sizes(), " on ", grad_normalized.device(),
           ", dense in channels_last.");
  const int64_t channels = grad_normalized.size(1);
  const Device device = grad_normalized.device();
  const char* of = "batch norm's input";
  for (const auto& [name, tensor] :
       {std::pair{"mean", &saved.mean}, {"invstd", &saved.invstd}, {"weight", &saved.weight}, {"bias", &saved.bias},
        {"grad_weight", &gradients.grad_weight}, {"grad_bias", &gradients.grad_bias},
        {"grad_scale", &gradients.grad_scale}, {"input_scale", &gradients.input_scale},
        {"offset", &gradients.offset}}) {
    check_per_channel(op, name, *tensor, channels, of, device);
  }
}

// Runs `direction` on x = input, w = weight, y = output; the one it writes is overwritten
// (added to, for BackwardDataAccumulate).
void convolve(ConvDirection direction, const Tensor& input, const Tensor& weight, const Tensor& output,
              const Window2d& window, const Tensor& bias = Tensor()) {
  Device device = output.device();
  DType dtype = output.dtype();
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device, current_stream(device));
  MemoryFormat layout = conv_call_layout(dtype, input, weight, output);
  const bool writes_x =
      direction == ConvDirection::BackwardData || direction == ConvDirection::BackwardDataAccumulate;
  Tensor x = in_layout(input, layout, direction != ConvDirection::BackwardData);
  Tensor w = in_layout(weight, layout, direction != ConvDirection::BackwardFilter);
  Tensor y = in_layout(output, layout, direction != ConvDirection::Forward);
  const ConvOperands data{x.raw_data(), w.raw_data(), y.raw_data()};
  const ConvProblem problem{direction, dtype, layout, x.sizes(), w.sizes(), y.sizes(), window,
                            dtype == DType::Float32 && cudnn_allow_tf32(), cudnn_deterministic(), alignment(data)};

  const ConvPlan& plan = plan_for(handle, device, problem, data);
  run_with_workspace(handle, device, plan, data);
  if (bias.defined()) {
    // y += bias, broadcast over (N, H, W) as a (1, K, 1, 1) tensor. alpha = beta = 1, read
    // as double for float64 data and as float otherwise.
    static constexpr float kOneFloat = 1.0f;
    static constexpr double kOneDouble = 1.0;
    const void* one = dtype == DType::Float64 ? static_cast<const void*>(&kOneDouble) : &kOneFloat;
    MG_CUDNN_CHECK(
        cudnnAddTensor(handle, one, plan.bias->get(), bias.raw_data(), one, plan.output->get(), data.output));
  }
  // A result computed in a temporary goes to its caller's tensor.
  if (direction == ConvDirection::Forward && !y.is_same(output)) copy(y, output);
  if (writes_x && !x.is_same(input)) copy(x, input);
  if (direction == ConvDirection::BackwardFilter && !w.is_same(weight)) copy(w, weight);
}

}  // namespace

bool conv_usable(const Tensor& input, const Tensor& weight, const Tensor& output) {
  if (!cudnn_enabled()) return false;
  for (const Tensor* tensor : {&input, &weight, &output}) {
    if (tensor->numel() == 0 || tensor->numel() > INT_MAX) return false;
  }
  return true;
}

void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
            const Tensor& output) {
  convolve(ConvDirection::Forward, input, weight, output, window, bias);
}

bool conv2d_with_statistics(const Tensor& input, const Tensor& weight, const Window2d& window,
                            const Tensor& output, const Tensor& sum, const Tensor& square_sum) {
  const DType dtype = output.dtype();
  if (!cudnn_fusion() || cudnn_deterministic() || !is_16_bit_float(dtype) || !conv_usable(input, weight, output)) {
    return false;
  }
  for (const Tensor* tensor : {&input, &weight, &output}) {
    if (needs_layout_copy(*tensor, MemoryFormat::ChannelsLast)) return false;
  }
  const Device device = output.device();
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device, current_stream(device));
  const ConvOperands data{input.raw_data(), weight.raw_data(), output.raw_data(), sum.raw_data(),
                          square_sum.raw_data()};
  const ConvProblem problem = fused_problem(ConvDirection::ForwardStatistics, input, weight, window, output, data);
  const ConvPlan& plan = plan_for(handle, device, problem, data);
  if (!plan.runnable()) return false;
  run_with_workspace(handle, device, plan, data);
  return true;
}

bool conv2d_normalized_with_statistics(const Tensor& input, const Tensor& scale, const Tensor& bias,
                                       const Tensor& weight, const Window2d& window, const Tensor& output,
                                       const Tensor& sum, const Tensor& square_sum) {
  check_normalized_convolution(input, scale, bias, weight, window, output, sum, square_sum);
  if (!cudnn_fusion() || cudnn_deterministic() || !conv_usable(input, weight, output)) return false;
  const Device device = output.device();
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device, current_stream(device));
  // NOTE: in benchmark mode the candidates are timed on the float32 coefficients even where
  // the plan reads them in 16 bits: the first half of the bytes, read as garbage values,
  // which costs the same; the output they write is overwritten below.
  ConvOperands data{input.raw_data(), weight.raw_data(), output.raw_data(), sum.raw_data(),
                    square_sum.raw_data(), scale.raw_data(), bias.raw_data()};
  const ConvProblem problem =
      fused_problem(ConvDirection::ForwardNormalizedStatistics, input, weight, window, output, data);
  const ConvPlan& plan = plan_for(handle, device, problem, data);
  if (!plan.runnable()) return false;
  // C values each, converted only where cuDNN had no engine reading float32 coefficients.
  const Tensor plan_scale = in_dtype(scale, plan.coefficient_dtype), plan_bias = in_dtype(bias, plan.coefficient_dtype);
  data.scale = plan_scale.raw_data();
  data.bias = plan_bias.raw_data();
  run_with_workspace(handle, device, plan, data);
  return true;
}

void conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                           const Tensor& grad_input, bool accumulate) {
  convolve(accumulate ? ConvDirection::BackwardDataAccumulate : ConvDirection::BackwardData, grad_input, weight,
           grad_output, window);
}

bool conv2d_backward_input_relu_batch_norm(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                                           const BatchNormSaved& saved, const Tensor& grad_normalized,
                                           const BatchNormGradients& gradients) {
  check_relu_batch_norm_backward(grad_output, weight, window, saved, grad_normalized, gradients);
  if (!cudnn_backward_fusion() || cudnn_deterministic() || !conv_usable(grad_normalized, weight, grad_output)) {
    return false;
  }
  const Device device = grad_output.device();
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device, current_stream(device));
  ConvOperands data{grad_normalized.raw_data(), weight.raw_data(), grad_output.raw_data()};
  data.batch_norm = {.input = saved.input.raw_data(),
                     .mean = saved.mean.raw_data(),
                     .invstd = saved.invstd.raw_data(),
                     .weight = saved.weight.raw_data(),
                     .bias = saved.bias.raw_data(),
                     .grad_weight = gradients.grad_weight.raw_data(),
                     .grad_bias = gradients.grad_bias.raw_data(),
                     .grad_scale = gradients.grad_scale.raw_data(),
                     .input_scale = gradients.input_scale.raw_data(),
                     .offset = gradients.offset.raw_data()};
  const ConvProblem problem = fused_problem(ConvDirection::BackwardDataReluBatchNorm, grad_normalized, weight, window,
                                            grad_output, data);
  const ConvPlan& plan = plan_for(handle, device, problem, data);
  if (!plan.runnable()) return false;
  run_with_workspace(handle, device, plan, data);
  return true;
}

void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight) {
  convolve(ConvDirection::BackwardFilter, input, grad_weight, grad_output, window);
}

}  // namespace mg::cuda::cudnn
