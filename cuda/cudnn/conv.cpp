// cuda/cudnn/conv.cpp — convolution through cuDNN's convolution API (see conv.h).
//
// One call, in any direction:
// 1. Layout. The call runs in one layout for all three tensors: channels_last when any of
//    them is (PyTorch's rule: a channels_last input or weight makes a channels_last
//    output), NCHW otherwise — and NCHW always for float64, for which cuDNN has no NHWC
//    kernels worth the name (PyTorch keeps float64 convolutions contiguous too). An operand
//    not dense in that layout is copied into it; a result not dense in it is computed into
//    a temporary and copied back. Both are WORKSPACE and only happen for mixed layouts.
// 2. Plan. The key (cuda/cudnn/algorithm_cache.h) finds the cached descriptors and
//    algorithm; on a miss they are built and an algorithm chosen: with benchmark off, the
//    first of cuDNN's heuristics (cudnnGet*Algorithm_v7) that is runnable and whose
//    workspace fits cudnn_workspace_limit(); with benchmark on, the fastest that
//    cudnnFind*AlgorithmEx measures on the call's own tensors.
// 3. Workspace. The chosen algorithm's scratch memory is borrowed from the caching
//    allocator as a WORKSPACE tensor for the duration of the call and released when it
//    returns, so it shows in the WORKSPACE peak but not in steady state. The block goes
//    back to the pool of the current stream, where every kernel reading it was queued,
//    so the allocator's stream-ordered reuse makes the early release safe.
// The handle is the calling thread's for the device, bound to its current stream.
#include "cuda/cudnn/conv.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/factory.h"
#include "cuda/cudnn/algorithm_cache.h"
#include "cuda/cudnn/check.h"
#include "cuda/cudnn/handle.h"
#include "cuda/cudnn/settings.h"
#include "cuda/kernels/cuda_kernels.h"
#include "cuda/runtime.h"

namespace mg::cuda::cudnn {

namespace {

// Device pointers of one call: x (input), w (weight), y (output), whichever is written.
struct Operands {
  void* input;
  void* weight;
  void* output;
};

// alpha = 1, beta = 0 (overwrite). cuDNN reads double scaling factors for float64 data
// and float ones for every other type.
constexpr float kOneFloat = 1.0f, kZeroFloat = 0.0f;
constexpr double kOneDouble = 1.0, kZeroDouble = 0.0;
const void* one(DType dtype) {
  return dtype == DType::Float64 ? static_cast<const void*>(&kOneDouble) : &kOneFloat;
}
const void* zero(DType dtype) {
  return dtype == DType::Float64 ? static_cast<const void*>(&kZeroDouble) : &kZeroFloat;
}

// ---- the three directions, in one shape: what differs is only which cuDNN functions run
// and in which order they take the descriptors ----

struct Forward {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algorithm = cudnnConvolutionFwdAlgo_t;
  static constexpr ConvDirection direction = ConvDirection::Forward;

  static int max_count(cudnnHandle_t handle) {
    int count = 0;
    MG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count));
    return count;
  }
  static int heuristics(cudnnHandle_t handle, const ConvPlan& plan, Perf* results, int count) {
    int returned = 0;
    MG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan.input.get(), plan.weight.get(),
                                                          plan.convolution.get(), plan.output.get(), count,
                                                          &returned, results));
    return returned;
  }
  static int find(cudnnHandle_t handle, const ConvPlan& plan, const Operands& data, Perf* results, int count,
                  void* workspace, size_t workspace_bytes) {
    int returned = 0;
    MG_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        handle, plan.input.get(), data.input, plan.weight.get(), data.weight, plan.convolution.get(),
        plan.output.get(), data.output, count, &returned, results, workspace, workspace_bytes));
    return returned;
  }
  static cudnnStatus_t workspace_size(cudnnHandle_t handle, const ConvPlan& plan, Algorithm algorithm,
                                      size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(handle, plan.input.get(), plan.weight.get(),
                                                   plan.convolution.get(), plan.output.get(), algorithm, bytes);
  }
  static void run(cudnnHandle_t handle, const ConvPlan& plan, const Operands& data, void* workspace, DType dtype) {
    MG_CUDNN_CHECK(cudnnConvolutionForward(handle, one(dtype), plan.input.get(), data.input, plan.weight.get(),
                                           data.weight, plan.convolution.get(),
                                           static_cast<Algorithm>(plan.algorithm), workspace, plan.workspace_bytes,
                                           zero(dtype), plan.output.get(), data.output));
  }
};

// grad_input (x) from grad_output (y) and the weight.
struct BackwardData {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algorithm = cudnnConvolutionBwdDataAlgo_t;
  static constexpr ConvDirection direction = ConvDirection::BackwardData;

  static int max_count(cudnnHandle_t handle) {
    int count = 0;
    MG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count));
    return count;
  }
  static int heuristics(cudnnHandle_t handle, const ConvPlan& plan, Perf* results, int count) {
    int returned = 0;
    MG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, plan.weight.get(), plan.output.get(),
                                                               plan.convolution.get(), plan.input.get(), count,
                                                               &returned, results));
    return returned;
  }
  static int find(cudnnHandle_t handle, const ConvPlan& plan, const Operands& data, Perf* results, int count,
                  void* workspace, size_t workspace_bytes) {
    int returned = 0;
    MG_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        handle, plan.weight.get(), data.weight, plan.output.get(), data.output, plan.convolution.get(),
        plan.input.get(), data.input, count, &returned, results, workspace, workspace_bytes));
    return returned;
  }
  static cudnnStatus_t workspace_size(cudnnHandle_t handle, const ConvPlan& plan, Algorithm algorithm,
                                      size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, plan.weight.get(), plan.output.get(),
                                                        plan.convolution.get(), plan.input.get(), algorithm, bytes);
  }
  static void run(cudnnHandle_t handle, const ConvPlan& plan, const Operands& data, void* workspace, DType dtype) {
    MG_CUDNN_CHECK(cudnnConvolutionBackwardData(handle, one(dtype), plan.weight.get(), data.weight,
                                                plan.output.get(), data.output, plan.convolution.get(),
                                                static_cast<Algorithm>(plan.algorithm), workspace,
                                                plan.workspace_bytes, zero(dtype), plan.input.get(), data.input));
  }
};

// grad_weight (w) from the input (x) and grad_output (y).
struct BackwardFilter {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algorithm = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr ConvDirection direction = ConvDirection::BackwardFilter;

  static int max_count(cudnnHandle_t handle) {
    int count = 0;
    MG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count));
    return count;
  }
  static int heuristics(cudnnHandle_t handle, const ConvPlan& plan, Perf* results, int count) {
    int returned = 0;
    MG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan.input.get(), plan.output.get(),
                                                                 plan.convolution.get(), plan.weight.get(), count,
                                                                 &returned, results));
    return returned;
  }
  static int find(cudnnHandle_t handle, const ConvPlan& plan, const Operands& data, Perf* results, int count,
                  void* workspace, size_t workspace_bytes) {
    int returned = 0;
    MG_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        handle, plan.input.get(), data.input, plan.output.get(), data.output, plan.convolution.get(),
        plan.weight.get(), data.weight, count, &returned, results, workspace, workspace_bytes));
    return returned;
  }
  static cudnnStatus_t workspace_size(cudnnHandle_t handle, const ConvPlan& plan, Algorithm algorithm,
                                      size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan.input.get(), plan.output.get(),
                                                          plan.convolution.get(), plan.weight.get(), algorithm,
                                                          bytes);
  }
  static void run(cudnnHandle_t handle, const ConvPlan& plan, const Operands& data, void* workspace, DType dtype) {
    MG_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, one(dtype), plan.input.get(), data.input,
                                                  plan.output.get(), data.output, plan.convolution.get(),
                                                  static_cast<Algorithm>(plan.algorithm), workspace,
                                                  plan.workspace_bytes, zero(dtype), plan.weight.get(),
                                                  data.weight));
  }
};

// ---- choosing an algorithm ----

// The math mode asked for (see settings.h): float32 follows allow_tf32, 16-bit types use
// tensor cores, float64 has only one kind of math.
cudnnMathType_t requested_math(DType dtype) {
  switch (dtype) {
    case DType::Float32: return cudnn_allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    case DType::Float16:
    case DType::BFloat16: return CUDNN_TENSOR_OP_MATH;
    default: return CUDNN_DEFAULT_MATH;
  }
}

// The math type an algorithm result runs with. cuDNN pairs each result with one (an
// algorithm may exist in tensor-core and plain variants), and the pair must be set on the
// descriptor before running it. NOTE: two overrides keep float32 honest: without TF32 it
// stays CUDNN_FMA_MATH whatever the result says, and CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
// (which rounds float32 data to float16) is never taken.
template <class Perf>
cudnnMathType_t math_of(const Perf& result, cudnnMathType_t requested) {
  if (requested == CUDNN_FMA_MATH) return CUDNN_FMA_MATH;
  if (result.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return requested;
  return result.mathType;
}

// The exact workspace bytes `result`'s algorithm needs with its math type, which it leaves
// set on the plan's convolution descriptor; nothing when cuDNN cannot run it here.
template <class Op>
std::optional<size_t> runnable_workspace(cudnnHandle_t handle, ConvPlan& plan, const typename Op::Perf& result,
                                         cudnnMathType_t requested) {
  if (result.status != CUDNN_STATUS_SUCCESS) return std::nullopt;
  plan.convolution.set_math_type(math_of(result, requested));
  size_t bytes = 0;
  // NOTE: a failure here is an answer (this algorithm does not apply), not an error.
  if (Op::workspace_size(handle, plan, result.algo, &bytes) != CUDNN_STATUS_SUCCESS) return std::nullopt;
  return bytes;
}

// Scratch memory from the caching allocator, tagged WORKSPACE; undefined for 0 bytes.
Tensor borrow_workspace(size_t bytes, Device device) {
  if (bytes == 0) return Tensor();
  return empty({static_cast<int64_t>(bytes)},
               {.dtype = DType::UInt8, .device = device, .category = MemoryCategory::Workspace});
}
void* pointer(const Tensor& workspace) { return workspace.defined() ? workspace.raw_data() : nullptr; }

template <class Op>
void choose_algorithm(cudnnHandle_t handle, ConvPlan& plan, const Operands& data, DType dtype,
                      cudnnMathType_t requested, bool benchmark, Device device) {
  int count = Op::max_count(handle);
  std::vector<typename Op::Perf> results(static_cast<size_t>(std::max(count, 1)));
  int returned = Op::heuristics(handle, plan, results.data(), count);
  size_t limit = cudnn_workspace_limit();
  if (benchmark) {
    // Time every runnable algorithm, lending as much scratch as the hungriest one within
    // the limit needs. The timing runs write only the call's own result tensor.
    size_t largest = 0;
    for (int i = 0; i < returned; ++i) {
      std::optional<size_t> bytes = runnable_workspace<Op>(handle, plan, results[i], requested);
      if (bytes && *bytes <= limit) largest = std::max(largest, *bytes);
    }
    plan.convolution.set_math_type(requested);
    Tensor workspace = borrow_workspace(largest, device);
    returned = Op::find(handle, plan, data, results.data(), count, pointer(workspace), largest);
    limit = largest;
  }
  for (int i = 0; i < returned; ++i) {  // heuristics: best expected first; timings: fastest first
    std::optional<size_t> bytes = runnable_workspace<Op>(handle, plan, results[i], requested);
    if (!bytes || *bytes > limit) continue;
    plan.algorithm = static_cast<int>(results[i].algo);
    plan.workspace_bytes = *bytes;
    return;
  }
  MG_CHECK(false, "cuDNN has no ", direction_name(Op::direction), " convolution algorithm for ", dtype,
           " with a workspace within cudnn_workspace_limit() = ", cudnn_workspace_limit(), " bytes (",
           returned, " candidates). Hint: raise it with set_cudnn_workspace_limit, or run the im2col path "
           "with set_cudnn_enabled(false).");
}

// The largest power of two up to 16 dividing every pointer: cuDNN's vectorised kernels
// need aligned data, so a choice made for aligned tensors must not serve offset views.
int alignment(const Operands& data) {
  auto bits = reinterpret_cast<uintptr_t>(data.input) | reinterpret_cast<uintptr_t>(data.weight) |
              reinterpret_cast<uintptr_t>(data.output);
  int result = 16;
  while (result > 1 && bits % static_cast<uintptr_t>(result) != 0) result /= 2;
  return result;
}

template <class Op>
const ConvPlan& plan_for(cudnnHandle_t handle, Device device, DType dtype, MemoryFormat layout, const Tensor& input,
                         const Tensor& weight, const Tensor& output, const Window2d& window, const Operands& data) {
  cudnnMathType_t math = requested_math(dtype);
  bool benchmark = cudnn_benchmark();
  ConvKey key = make_conv_key(Op::direction, device, dtype, layout, input.sizes(), weight.sizes(), output.sizes(),
                              window, math, benchmark, alignment(data));
  if (const ConvPlan* cached = find_conv_plan(key)) return *cached;
  auto plan = std::make_unique<ConvPlan>(Op::direction, dtype, layout, input.sizes(), weight.sizes(), output.sizes(),
                                         window, math);
  choose_algorithm<Op>(handle, *plan, data, dtype, math, benchmark, device);
  return insert_conv_plan(key, std::move(plan));
}

// ---- layouts ----

MemoryFormat call_layout(DType dtype, const Tensor& input, const Tensor& weight, const Tensor& output) {
  if (dtype == DType::Float64) return MemoryFormat::Contiguous;
  for (const Tensor* tensor : {&input, &weight, &output}) {
    if (suggest_memory_format(*tensor) == MemoryFormat::ChannelsLast) return MemoryFormat::ChannelsLast;
  }
  return MemoryFormat::Contiguous;
}

// `tensor` itself when dense in `layout`, else a WORKSPACE tensor in `layout` — holding
// tensor's values when `with_values` (an operand), uninitialised otherwise (a result).
Tensor in_layout(const Tensor& tensor, MemoryFormat layout, bool with_values) {
  if (is_contiguous_in(tensor, layout)) return tensor;
  Tensor result =
      empty(tensor.sizes(), {.dtype = tensor.dtype(), .device = tensor.device(), .category = MemoryCategory::Workspace},
            layout);
  if (with_values) copy(tensor, result);
  return result;
}

// Runs direction Op on x = input, w = weight, y = output; the one Op writes is overwritten.
template <class Op>
void convolve(const Tensor& input, const Tensor& weight, const Tensor& output, const Window2d& window,
              const Tensor& bias = Tensor()) {
  Device device = output.device();
  DType dtype = output.dtype();
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device, current_stream(device));
  MemoryFormat layout = call_layout(dtype, input, weight, output);
  constexpr ConvDirection direction = Op::direction;
  Tensor x = in_layout(input, layout, direction != ConvDirection::BackwardData);
  Tensor w = in_layout(weight, layout, direction != ConvDirection::BackwardFilter);
  Tensor y = in_layout(output, layout, direction != ConvDirection::Forward);
  Operands data{x.raw_data(), w.raw_data(), y.raw_data()};

  const ConvPlan& plan = plan_for<Op>(handle, device, dtype, layout, x, w, y, window, data);
  {
    Tensor workspace = borrow_workspace(plan.workspace_bytes, device);
    Op::run(handle, plan, data, pointer(workspace), dtype);
  }  // the workspace goes back to the cache here
  if (bias.defined()) {
    // y += bias, broadcast over (N, H, W) as a (1, K, 1, 1) tensor.
    MG_CUDNN_CHECK(cudnnAddTensor(handle, one(dtype), plan.bias->get(), bias.raw_data(), one(dtype),
                                  plan.output.get(), data.output));
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
  convolve<Forward>(input, weight, output, window, bias);
}

void conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                           const Tensor& grad_input) {
  convolve<BackwardData>(grad_input, weight, grad_output, window);
}

void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight) {
  convolve<BackwardFilter>(input, grad_weight, grad_output, window);
}

}  // namespace mg::cuda::cudnn
