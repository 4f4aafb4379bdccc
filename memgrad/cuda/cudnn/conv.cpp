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

// The largest power of two up to 16 dividing every pointer: cuDNN's vectorised kernels
// need aligned data, so a choice made for aligned tensors must not serve offset views.
int alignment(const ConvOperands& data) {
  auto bits = reinterpret_cast<uintptr_t>(data.input) | reinterpret_cast<uintptr_t>(data.weight) |
              reinterpret_cast<uintptr_t>(data.output);
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

// ---- layouts ----

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

// Runs `direction` on x = input, w = weight, y = output; the one it writes is overwritten.
void convolve(ConvDirection direction, const Tensor& input, const Tensor& weight, const Tensor& output,
              const Window2d& window, const Tensor& bias = Tensor()) {
  Device device = output.device();
  DType dtype = output.dtype();
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device, current_stream(device));
  MemoryFormat layout = conv_call_layout(dtype, input, weight, output);
  Tensor x = in_layout(input, layout, direction != ConvDirection::BackwardData);
  Tensor w = in_layout(weight, layout, direction != ConvDirection::BackwardFilter);
  Tensor y = in_layout(output, layout, direction != ConvDirection::Forward);
  const ConvOperands data{x.raw_data(), w.raw_data(), y.raw_data()};
  const ConvProblem problem{direction, dtype, layout, x.sizes(), w.sizes(), y.sizes(), window,
                            dtype == DType::Float32 && cudnn_allow_tf32(), cudnn_deterministic(), alignment(data)};

  const ConvPlan& plan = plan_for(handle, device, problem, data);
  {
    Tensor workspace = borrow_workspace(plan.workspace_bytes, device);
    run_conv_plan(handle, plan, data, workspace.defined() ? workspace.raw_data() : nullptr);
  }  // the workspace goes back to the cache here
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
  if (direction == ConvDirection::BackwardData && !x.is_same(input)) copy(x, input);
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
  if (!cudnn_fusion() || cudnn_deterministic() || (dtype != DType::Float16 && dtype != DType::BFloat16) || !conv_usable(input, weight, output)) {
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
  const ConvProblem problem{ConvDirection::ForwardStatistics, dtype, MemoryFormat::ChannelsLast, input.sizes(),
                            weight.sizes(), output.sizes(), window, /*allow_tf32=*/false, cudnn_deterministic(),
                            alignment(data)};
  const ConvPlan& plan = plan_for(handle, device, problem, data);
  if (!plan.runnable()) return false;
  Tensor workspace = borrow_workspace(plan.workspace_bytes, device);
  run_conv_plan(handle, plan, data, workspace.defined() ? workspace.raw_data() : nullptr);
  return true;
}

void conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                           const Tensor& grad_input) {
  convolve(ConvDirection::BackwardData, grad_input, weight, grad_output, window);
}

void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight) {
  convolve(ConvDirection::BackwardFilter, input, grad_weight, grad_output, window);
}

}  // namespace mg::cuda::cudnn
