// cuda/cudnn/workspace_query.cpp — the workspace a convolution would borrow, asked of cuDNN
// without running it, for memory predictions (see the header).
//
// With benchmark mode off, cuda/cudnn/conv.cpp runs the first engine configuration of
// cuDNN's heuristics that finalizes within cudnn_workspace_limit()
// (cuda/cudnn/conv_engines.h). That choice depends on the shapes, dtype, layout, math
// settings and GPU only, never on data, so choose_conv_plan on the same problem, with no
// tensors at all, gives the workspace a real run of the shape borrows. Answers are kept
// per ConvKey, one choice per shape as the real cache makes it; the real cache itself is
// left alone (nothing here is ever run).
#include "memgrad/cuda/cudnn/workspace_query.h"

#include <map>
#include <memory>
#include <mutex>

#include "memgrad/cuda/cudnn/algorithm_cache.h"
#include "memgrad/cuda/cudnn/conv_engines.h"
#include "memgrad/cuda/cudnn/handle.h"
#include "memgrad/cuda/cudnn/settings.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

ConvDirection direction_of(ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: return ConvDirection::Forward;
    case ConvPass::BackwardInput: return ConvDirection::BackwardData;
    case ConvPass::BackwardWeight: return ConvDirection::BackwardFilter;
    case ConvPass::BackwardInputAccumulate: return ConvDirection::BackwardDataAccumulate;
  }
  return ConvDirection::Forward;
}

}  // namespace

std::optional<size_t> cudnn_heuristic_workspace_bytes(const ConvCall& call) {
  if (!is_available()) return std::nullopt;
  static std::mutex mutex;
  static auto* answers = new std::map<decltype(ConvKey::fields), size_t>;  // leaked, as the real cache is
  const Device device = Device::cuda(0);
  // As conv.cpp describes a call; real tensors start 512-byte aligned: cuDNN's widest, 16.
  const cudnn::ConvProblem problem{direction_of(call.pass), call.dtype, call.layout, call.input, call.weight,
                                   call.output, call.window, call.dtype == DType::Float32 && cudnn_allow_tf32(),
                                   cudnn_deterministic(), /*alignment=*/16};
  const ConvKey key = make_conv_key(problem.direction, device, problem.dtype, problem.layout, problem.input,
                                    problem.weight, problem.output, problem.window, problem.allow_tf32,
                                    problem.deterministic, /*benchmark=*/false, problem.alignment);
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto known = answers->find(key.fields); known != answers->end()) return known->second;
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device, current_stream(device));
  // Without benchmark mode no candidate runs, so the call needs no tensors.
  const std::unique_ptr<ConvPlan> plan =
      cudnn::choose_conv_plan(handle, device, problem, /*benchmark=*/false, {nullptr, nullptr, nullptr});
  answers->emplace(key.fields, plan->workspace_bytes);
  return plan->workspace_bytes;
}

}  // namespace mg::cuda
