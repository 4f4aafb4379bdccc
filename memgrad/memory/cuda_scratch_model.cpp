// memory/cuda_scratch_model.cpp — what the CUDA kernels borrow beside their results, replayed
// on the simulated device when it stands in for a GPU (memory/simulated_target.h).
//
// What goes through the caching allocator on a GPU, beside the tensors autograd makes:
//   cuBLAS / cuBLASLt  one WORKSPACE block per stream, allocated at the first matmul and
//                      kept for the life of the process (cuda/blas_handle.cpp): 32 MiB,
//                      the size on Hopper and newer (the H200; 8 MiB on older GPUs)
//   batch norm         per call, (5 + 2 x chunks) x C float32 (float64 for float64)
//                      coefficients and partial sums as WORKSPACE
//                      (cuda/kernels/batch_norm.cu, grid of channel_reduce.cuh)
//   cuDNN convolution  per call: copies of operands not dense in the call's layout (mixed
//                      layouts only), then the chosen algorithm's workspace, both WORKSPACE
//                      (cuda/cudnn/conv.cpp). With benchmark mode off the plan is
//                      cuDNN's heuristic choice, which depends on shapes only: where a GPU
//                      and cuDNN are present it is asked for the exact bytes
//                      (cuda/cudnn/workspace_query.cpp); elsewhere the workspace is
//                      ESTIMATED as the larger of the call's input and output.
//   fused attention    backward, per call, as WORKSPACE: float16 / bfloat16, B x H x Tq x
//                      (D + 1) float32, the dQ accumulator and D = rowsum(dO o O)
//                      (cuda/kernels/attention_backward.cu); float32, B x H x Tq float32, D
//                      alone (cuda/kernels/attention_simt.cu adds dQ into grad_q itself)
// Not modelled (each small or absent in the examples' training steps): reduce.cu's
// partial sums for long reductions (outputs x chunks floats), copies cuBLAS needs for
// operands without a unit stride, copies into non-contiguous destinations, and the
// im2col path convolutions take when cuDNN is off, and the dense copies fused attention makes
// of operands whose rows are not 16-byte aligned (views at odd offsets).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>

#include "memgrad/memory/cuda_scratch_model.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/simulated_target.h"
#include "memgrad/core/tensor.h"

namespace mg {

namespace {

constexpr int64_t kBlasWorkspaceBytes = int64_t{32} << 20;

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

void ensure_blas_workspace(Device device) {
  BlasWorkspace& workspace = blas_workspace();
  std::lock_guard<std::mutex> lock(workspace.mutex);
  if (!workspace.kept.defined()) workspace.kept = workspace_bytes(kBlasWorkspaceBytes, device);
}


void matmul(const Tensor& a, const Tensor& b, const Tensor& output) {
  if (output.numel() > 0) ensure_blas_workspace(output.device());
}

void linear_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output) {
  if (output.numel() > 0) ensure_blas_workspace(output.device());
}

// ---- batch norm: coefficients and partial sums per call ----

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// NOTE: channel_reduce.cuh's partial_grid(), restated: the number of chunks each channel's
// values are split into. Constants as there.
int64_t partial_chunks(const Tensor& input) {
  constexpr int64_t kTileChannels = 32, kTileRows = 8, kPlaneThreads = 256;
  constexpr int64_t kTargetBlocks = 1024, kMinValuesPerThread = 8, kMaxChunks = 1024;
  const int64_t channels = input.sizes()[1];
  int64_t inner = 1;
  for (int d = 2; d < input.dim(); ++d) inner *= input.sizes()[d];
  const int64_t per_channel = input.sizes()[0] * inner;
  const bool rows = inner == 1 || !input.is_contiguous();  // channels-last or (N, C)
  int64_t channel_blocks = channels, values_per_block = kPlaneThreads * kMinValuesPerThread;
  if (rows) {
    // The widest vector of adjacent channels (16 bytes at most) dividing C and keeping a
    // warp's 32 vectors within C; simulated blocks are aligned like real ones.
    int64_t vector = static_cast<int64_t>(16 / input.element_size());
    while (vector > 1 && (channels % vector != 0 || channels < kTileChannels * vector)) vector /= 2;
    channel_blocks = ceil_div(channels, kTileChannels * vector);
    values_per_block = kTileRows * kMinValuesPerThread;
  }
  const int64_t wanted = ceil_div(kTargetBlocks, channel_blocks);
  int64_t chunks = std::clamp<int64_t>(std::min(wanted, ceil_div(per_channel, values_per_block)), 1, kMaxChunks);
  const int64_t chunk_size = ceil_div(per_channel, chunks);
  return ceil_div(per_channel, chunk_size);
}

Tensor batch_norm_workspace(const Tensor& input, bool with_partials) {
  constexpr int64_t kCoefficients = 5;
  const int64_t channels = input.sizes()[1];
  const int64_t partials = with_partials ? 2 * partial_chunks(input) * channels : 0;
  const DType accumulate = input.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  return empty({kCoefficients * channels + partials},
               {.dtype = accumulate, .device = input.device(), .category = MemoryCategory::Workspace});
}

void batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, bool training, double momentum, double eps, bool relu,
                const Tensor& output, const Tensor& save_mean, const Tensor& save_invstd) {
  if (input.numel() == 0) return;
  const Tensor workspace = batch_norm_workspace(input, training);
}

void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Tensor& save_mean, const Tensor& save_invstd, bool relu, const Tensor& grad_input,
                         const Tensor& grad_weight, const Tensor& grad_bias) {
  if (input.numel() == 0 || input.sizes()[1] == 0) return;
  const Tensor workspace = batch_norm_workspace(input, /*with_partials=*/true);
}

// ---- fused attention: the backward's dQ accumulator and D ----

void attention_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                        const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  const int64_t rows = q.sizes()[0] * q.sizes()[1] * q.sizes()[2], head_dim = q.sizes()[3];
  if (rows == 0 || k.sizes()[2] == 0) return;
  const bool accumulates_in_grad_q = q.dtype() == DType::Float32;
  const Tensor workspace = empty({accumulates_in_grad_q ? rows : rows * (head_dim + 1)},
                                 {.dtype = DType::Float32, .device = q.device(), .category = MemoryCategory::Workspace});
}

// ---- cuDNN convolutions ----

// Calls whose workspace was estimated rather than asked of cuDNN (for describe()).
std::atomic<int64_t> estimated_calls{0};
std::atomic<int64_t> asked_calls{0};

size_t cudnn_workspace(const ConvCall& call) {
#ifdef MG_WITH_CUDNN
  if (std::optional<size_t> bytes = cuda::cudnn_heuristic_workspace_bytes(call)) {
    asked_calls.fetch_add(1, std::memory_order_relaxed);
    return *bytes;
  }
#endif
  estimated_calls.fetch_add(1, std::memory_order_relaxed);
  const size_t element = element_size(call.dtype);
  return static_cast<size_t>(std::max(call.input.numel(), call.output.numel())) * element;
}

// cudnn/conv.cpp's call_layout: channels_last when any tensor is (never for float64).
MemoryFormat call_layout(DType dtype, const Tensor& input, const Tensor& weight, const Tensor& output) {
  if (dtype == DType::Float64) return MemoryFormat::Contiguous;
  for (const Tensor* tensor : {&input, &weight, &output}) {
    if (suggest_memory_format(*tensor) == MemoryFormat::ChannelsLast) return MemoryFormat::ChannelsLast;
  }
  return MemoryFormat::Contiguous;
}

// cudnn/conv.cpp's in_layout: a WORKSPACE copy of a tensor not dense in the call's layout.
Tensor in_layout(const Tensor& tensor, MemoryFormat layout) {
  if (is_contiguous_in(tensor, layout)) return tensor;
  return empty(tensor.sizes(), {.dtype = tensor.dtype(), .device = tensor.device(), .category = MemoryCategory::Workspace},
               layout);
}

void convolve(ConvPass pass, const Tensor& input, const Tensor& weight, const Tensor& output, const Window2d& window) {
  const DType dtype = output.dtype();
  const MemoryFormat layout = call_layout(dtype, input, weight, output);
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
                           const Tensor& grad_input) {
  convolve(ConvPass::BackwardInput, grad_input, weight, grad_output, window);
}

void conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Window2d& window,
                            const Tensor& grad_weight) {
  convolve(ConvPass::BackwardWeight, input, grad_weight, grad_output, window);
}

std::string describe() {
  const int64_t estimated = estimated_calls.load(), asked = asked_calls.load();
  std::string text = "the CUDA kernels' scratch: cuBLAS's 32 MiB workspace, batch norm's partial sums, fused "
                     "attention's dQ accumulator, cuDNN's convolution workspace ";
  if (estimated == 0 && asked == 0) return text + "(no convolutions ran)";
  if (estimated == 0) return text + "as cuDNN's heuristics choose it on this GPU (exact)";
  return text + "ESTIMATED as the larger of each call's input and output (" + std::to_string(estimated) +
         " calls; no GPU with cuDNN to ask)";
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
