// memory/cuda_scratch_model.cpp — what the CUDA kernels borrow beside their results, replayed
// on the simulated device when it stands in for a GPU (memory/simulated_target.h).
//
// What goes through the caching allocator on a GPU, beside the tensors autograd makes, each
// sized or chosen by the function the CUDA code itself calls (cuda/plan/, host arithmetic
// built in every build, so a prediction needs neither a GPU nor the CUDA toolkit):
//   cuBLAS / cuBLASLt  one WORKSPACE block per stream, allocated at the first matmul and
//                      kept for the life of the process (cuda/blas_handle.cpp), of
//                      cuda/plan/blas_workspace.h's size for the Hopper GPU a prediction
//                      assumes (the H200): 32 MiB
//   batch norm         per call, (5 + 2 x chunks) x C float32 (float64 for float64)
//                      coefficients and partial sums as WORKSPACE
//                      (cuda/plan/batch_norm_workspace.h; the chunks of
//                      cuda/plan/channel_reduce_plan.h); the backward's copies of
//                      per-channel tensors not in that dtype (e.g. a float16 weight)
//   cuDNN convolution  per call: copies of operands not dense in the call's layout (mixed
//                      layouts only; cuda/plan/conv_layout.h), then the chosen algorithm's
//                      workspace, both WORKSPACE (cuda/cudnn/conv.cpp). With benchmark mode
//                      off the plan is cuDNN's heuristic choice, which depends on shapes
//                      only: where a GPU and cuDNN are present it is asked for the exact
//                      bytes (cuda/cudnn/workspace_query.h); elsewhere the workspace is
//                      ESTIMATED from the layout and pass (estimated_workspace()).
//   fused attention    backward, per call, float32 WORKSPACE (cuda/plan/attention_workspace.h):
//                      for float16 / bfloat16 the dQ accumulator and D = rowsum(dO o O), for
//                      float32 D alone; with deterministic algorithms, one accumulator slice
//                      per block of keys, in every dtype
// Not modelled (each small or absent in the examples' training steps): reduce.cu's
// partial sums for long reductions (outputs x chunks floats), copies cuBLAS needs for
// operands without a unit stride, copies into non-contiguous destinations, the im2col path
// convolutions take when cuDNN is off, the dense copies fused attention makes of operands
// whose rows are not 16-byte aligned (views at odd offsets), and batch norm's narrower
// channel vectors for such views (a simulated tensor has no address to test), and the
// deterministic embedding backward's sort (three int64 per looked-up position and CUB's
// scratch: 0.4 MiB for the GPT-2 step of 16 x 1024 tokens).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "memgrad/core/determinism.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/tensor.h"
#include "memgrad/cuda/cudnn/workspace_query.h"
#include "memgrad/cuda/plan/attention_workspace.h"
#include "memgrad/cuda/plan/batch_norm_workspace.h"
#include "memgrad/cuda/plan/blas_workspace.h"
#include "memgrad/cuda/plan/channel_reduce_plan.h"
#include "memgrad/cuda/plan/conv_call.h"
#include "memgrad/cuda/plan/conv_layout.h"
#include "memgrad/memory/simulated_target.h"

namespace mg {

namespace {

using cuda::ConvCall;
using cuda::ConvPass;

// The alignment the model gives every tensor's data: allocator blocks start 512-byte aligned,
// more than the 16 bytes any kernel's vectors ask for (views at odd offsets are not modelled).
constexpr size_t kDataAlignment = 16;

Tensor workspace_bytes(int64_t bytes, Device device) {
  return empty({bytes}, {.dtype = DType::UInt8, .device = device, .category = MemoryCategory::Workspace});
}

// ---- cuBLAS: one workspace kept from the first matmul on ----

struct BlasWorkspace {
  std::mutex mutex;
  Tensor kept;
};
BlasWorkspace& blas_workspace() {
  static auto* instance = new BlasWorkspace;  // leaked: tensors may outlive static destruction
  return *instance;
}

int64_t predicted_blas_workspace_bytes() {
  return static_cast<int64_t>(cuda::blas_workspace_bytes_for_capability(cuda::kPredictedComputeCapabilityMajor));
}

void ensure_blas_workspace(Device device) {
  BlasWorkspace& workspace = blas_workspace();
  std::lock_guard<std::mutex> lock(workspace.mutex);
  if (!workspace.kept.defined()) workspace.kept = workspace_bytes(predicted_blas_workspace_bytes(), device);
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& output) {
  if (output.numel() > 0) ensure_blas_workspace(output.device());
}

void linear_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output) {
  if (output.numel() > 0) ensure_blas_workspace(output.device());
}

// The GELU epilogue (cuda/lt_matmul.cpp) and its unfused fallback run in the same workspace.
// (The backward runs as its steps on every simulated device: core/simulated_kernels.cpp.)
void linear_gelu_forward(const Tensor&, const Tensor&, const Tensor&, bool, const Tensor&, const Tensor& output) {
  if (output.numel() > 0) ensure_blas_workspace(output.device());
}

// ---- batch norm: coefficients and partial sums per call ----

Tensor batch_norm_workspace(const Tensor& input, bool with_partials) {
  const cuda::channel_reduce::ChannelExtent extent = cuda::channel_reduce::channel_extent(input);
  const int64_t chunks = cuda::channel_reduce::plan_chunks(extent, input.element_size(), kDataAlignment).chunks;
  return empty({cuda::batch_norm_workspace_elements(extent.channels, chunks, with_partials)},
               {.dtype = cuda::batch_norm_accumulate_dtype(input.dtype()),
                .device = input.device(),
                .category = MemoryCategory::Workspace});
}

void batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, const Tensor& num_batches_tracked, bool training, double momentum,
                double eps, bool relu, const Tensor& residual, const ChannelSums& statistics, const Tensor& output,
                const Tensor& save_mean, const Tensor& save_invstd) {
  if (input.numel() == 0) return;
  const Tensor workspace = batch_norm_workspace(input, /*with_partials=*/training && !statistics.defined());
}

void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Tensor& save_mean, const Tensor& save_invstd, bool relu, const Tensor& output,
                         const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_residual) {
  if (input.numel() == 0 || input.sizes()[1] == 0) return;
  const Tensor workspace = batch_norm_workspace(input, /*with_partials=*/true);
  // The per-channel tensors, converted where they are not plain arrays of the accumulate dtype.
  const DType accumulate = cuda::batch_norm_accumulate_dtype(input.dtype());
  const Tensor per_channel[] = {cuda::batch_norm_channel_operand(save_mean, accumulate),
                                cuda::batch_norm_channel_operand(save_invstd, accumulate),
                                cuda::batch_norm_channel_operand(weight, accumulate),
                                cuda::batch_norm_channel_operand(bias, accumulate)};
}

// ---- fused attention: the backward's dQ accumulator and D ----

void attention_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                        const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  if (q.sizes()[0] * q.sizes()[1] * q.sizes()[2] == 0 || k.sizes()[2] == 0) return;
  const cuda::AttentionBackwardWorkspace sizes = cuda::attention_backward_workspace(
      q.dtype(), q.sizes(), k.sizes()[2], params.dropout_p > 0.0, deterministic_algorithms());
  const Tensor workspace = empty({sizes.elements()},
                                 {.dtype = cuda::kAttentionWorkspaceDType,
                                  .device = q.device(),
                                  .category = MemoryCategory::Workspace});
}

// ---- cuDNN convolutions ----

// Calls whose workspace was estimated rather than asked of cuDNN (for describe()).
std::atomic<int64_t> estimated_calls{0};
std::atomic<int64_t> asked_calls{0};

// Without a GPU to ask, cuDNN's choice is estimated from what it was seen to choose on an
// H200 (cuDNN 9; every convolution call of ResNet-18 and ResNet-50 training steps, traced
// with MG_TRACE_CONV_WORKSPACE=1, docs/memory.md "Predicting peak memory"):
//   - contiguous (NCHW) calls run tensor-core engines that work in NHWC: their workspace
//     holds the operands transposed, about input + weight + output (0.95x to 1.48x of it;
//     a few 1x1 calls need none);
//   - channels_last calls read their operands as they are: forward and input-gradient
//     calls need almost none, weight-gradient calls up to a third of the operands' bytes
//     (its split-K partial sums);
//   - except where the channel count is not a multiple of the tensor cores' vector (the
//     3-channel stem): those transpose and pad as NCHW calls do.
// float64 has no tensor-core engine; it keeps the larger of input and output.
size_t estimated_workspace(const ConvCall& call) {
  const auto operand_bytes = [&](const Shape& shape) {
    return static_cast<size_t>(shape.numel()) * element_size(call.dtype);
  };
  const size_t input = operand_bytes(call.input), weight = operand_bytes(call.weight),
               output = operand_bytes(call.output);
  if (call.dtype == DType::Float64) return std::max(input, output);
  const int64_t tensor_core_channels = 16 / static_cast<int64_t>(element_size(call.dtype));  // 16 bytes
  const bool channels_fit = call.input[1] % tensor_core_channels == 0 && call.output[1] % tensor_core_channels == 0;
  if (call.layout == MemoryFormat::Contiguous || !channels_fit) return input + weight + output;
  return call.pass == ConvPass::BackwardWeight ? (input + weight + output) / 3 : 0;
}

// NOTE: MG_TRACE_CONV_WORKSPACE=1 prints, per convolution, what cuDNN chose and what the
// estimate would have said, so that the estimate can be checked against a GPU's answers.
bool tracing_workspace() {
  static const bool tracing = [] {
    const char* value = std::getenv("MG_TRACE_CONV_WORKSPACE");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return tracing;
}

void trace_workspace(const ConvCall& call, std::optional<size_t> asked) {
  static const char* const pass_names[] = {"forward", "backward_input", "backward_weight",
                                           "backward_input_accumulate"};
  std::ostringstream line;
  line << "conv_workspace pass=" << pass_names[static_cast<int>(call.pass)] << " dtype=" << call.dtype
       << " layout=" << (call.layout == MemoryFormat::ChannelsLast ? "channels_last" : "contiguous")
       << " input=" << call.input << " weight=" << call.weight << " output=" << call.output
       << " stride=" << call.window.stride_h << " padding=" << call.window.pad_h
       << " asked=" << (asked ? std::to_string(*asked) : std::string("none"))
       << " estimated=" << estimated_workspace(call) << "\n";
  std::cerr << line.str();
}

size_t cudnn_workspace(const ConvCall& call) {
  std::optional<size_t> asked;
#ifdef MG_WITH_CUDNN
  asked = cuda::cudnn_heuristic_workspace_bytes(call);
#endif
  if (tracing_workspace()) trace_workspace(call, asked);
  if (asked) {
    asked_calls.fetch_add(1, std::memory_order_relaxed);
    return *asked;
  }
  estimated_calls.fetch_add(1, std::memory_order_relaxed);
  return estimated_workspace(call);
}

// The WORKSPACE tensor conv.cpp puts in `tensor`'s place when it is not dense in the call's layout.
Tensor in_layout(const Tensor& tensor, MemoryFormat layout) {
  if (!cuda::needs_layout_copy(tensor, layout)) return tensor;
  return empty(tensor.sizes(), {.dtype = tensor.dtype(), .device = tensor.device(), .category = MemoryCategory::Workspace},
               layout);
}

void convolve(ConvPass pass, const Tensor& input, const Tensor& weight, const Tensor& output, const Window2d& window) {
  const DType dtype = output.dtype();
  const MemoryFormat layout = cuda::conv_call_layout(dtype, input, weight, output);
  const Tensor x = in_layout(input, layout);
  const Tensor w = in_layout(weight, layout);
  const Tensor y = in_layout(output, layout);
  const size_t bytes = cudnn_workspace({pass, dtype, layout, input.sizes(), weight.sizes(), output.sizes(), window});
  const Tensor workspace = bytes > 0 ? workspace_bytes(static_cast<int64_t>(bytes), output.device()) : Tensor();
}

void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Window2d& window,
            const Tensor& output) {
  convolve(ConvPass::Forward, input, weight, output, window);
}

void conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Window2d& window,
                           const Tensor& grad_input, bool accumulate) {
  convolve(accumulate ? ConvPass::BackwardInputAccumulate : ConvPass::BackwardInput, grad_input, weight, grad_output,
           window);
}

void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight) {
  convolve(ConvPass::BackwardWeight, input, grad_weight, grad_output, window);
}

std::string describe() {
  const int64_t estimated = estimated_calls.load(), asked = asked_calls.load();
  const std::string blas_mib = std::to_string(predicted_blas_workspace_bytes() >> 20);
  std::string text = "the CUDA kernels' scratch: cuBLAS's " + blas_mib + " MiB workspace, batch norm's partial "
                     "sums, fused attention's dQ accumulator, cuDNN's convolution workspace ";
  if (estimated == 0 && asked == 0) return text + "(no convolutions ran)";
  if (estimated == 0) return text + "as cuDNN's heuristics choose it on this GPU (exact)";
  return text + "ESTIMATED from each call's layout and pass as cuDNN 9 chose on an H200 (" +
         std::to_string(estimated) + " calls; no GPU with cuDNN to ask)";
}

// The next prediction starts as a fresh process would: no workspace, nothing counted.
void reset() {
  BlasWorkspace& workspace = blas_workspace();
  std::lock_guard<std::mutex> lock(workspace.mutex);
  workspace.kept = Tensor();
  estimated_calls.store(0);
  asked_calls.store(0);
}

ScratchModel make_model() {
  KernelTable kernels = no_scratch_kernel_table();
  kernels.matmul = matmul;
  kernels.linear_forward = linear_forward;
  kernels.linear_gelu_forward = linear_gelu_forward;
  kernels.batch_norm = batch_norm;
  kernels.batch_norm_backward = batch_norm_backward;
  kernels.attention_backward = attention_backward;
  kernels.conv2d = conv2d;
  kernels.conv2d_backward_input = conv2d_backward_input;
  kernels.conv2d_backward_weight = conv2d_backward_weight;
  return {.kernels = kernels, .reset = reset, .describe = describe};
}

}  // namespace

const ScratchModel& cuda_scratch_model() {
  static const ScratchModel model = make_model();
  return model;
}

}  // namespace mg
