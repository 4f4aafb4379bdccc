// cuda/cudnn/conv_engines.cpp — the engines cuDNN offers for a convolution's graph
// (cuda/cudnn/conv_graph.h), the choice among them, and running the chosen one (see the
// header).
#include "memgrad/cuda/cudnn/conv_engines.h"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/cudnn/backend_descriptor.h"
#include "memgrad/cuda/cudnn/check.h"
#include "memgrad/cuda/cudnn/conv_graph.h"
#include "memgrad/cuda/cudnn/settings.h"
#include "memgrad/cuda/hold_stream.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda::cudnn {

namespace {

struct Engine {
  int64_t index;
  bool allowed;
};

// The configuration's engine and whether its numerical notes are allowed here (see the
// header: no down-converted inputs, reduced-precision reductions for 16-bit data only, and
// tensor cores for float32 only with allow_tf32, nothing nondeterministic when asked).
// NOTE: ForwardNormalizedStatistics' convolution reads the prologue's float32 result, which
// a 16-bit engine must round to 16 bits, as the unfused path rounds it when it writes the
// activation: a down-converted input there is the data's own precision, not less. So does
// BackwardDataReluBatchNorm's BN_BWD_WEIGHTS read the 16-bit gradient x that its ReLU's
// backward wrote, as the unfused batch norm's backward reads dgrad's 16-bit result.
// NOTE: PyTorch drops only down-converted inputs (and TF32 when off). Dropping
// reduced-precision reductions for float16 too cost ResNet-50's 7x7 stem (3 input
// channels) cuDNN's image-first-layer kernels: 1.2 ms per AMP step against PyTorch's 0.4.
Engine engine_of(const BackendDescriptor& config, const ConvProblem& problem) {
  const EngineFacts facts = engine_facts(config);
  bool allowed = true;
  for (cudnnBackendNumericalNote_t note : facts.notes) {
    switch (note) {
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        if (problem.direction != ConvDirection::ForwardNormalizedStatistics &&
            problem.direction != ConvDirection::BackwardDataReluBatchNorm) {
          allowed = false;
        }
        break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        if (!is_16_bit_float(problem.dtype)) allowed = false;
        break;
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
        if (problem.dtype == DType::Float32 && !problem.allow_tf32) allowed = false;
        break;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
        if (problem.deterministic) allowed = false;
        break;
      default: break;
    }
  }
  return {facts.index, allowed};
}

// Every configuration of heuristics mode A, then of the fallback list, that is allowed,
// finalizes into a plan for this graph, and needs at most `limit` workspace bytes — in the
// heuristics' order. `first_only` stops at the first.
// NOTE: heuristics mode B offered no configuration mode A had not (every ResNet-50 shape
// on an H200, cuDNN 9.14), so benchmark mode times mode A's.
std::vector<std::unique_ptr<ConvPlan>> runnable_plans(cudnnHandle_t handle, const ConvProblem& problem,
                                                      DType coefficients, size_t limit, bool first_only) {
  const std::shared_ptr<const std::vector<BackendDescriptor>> graph_parts =
      operation_graph(handle, problem, coefficients);
  std::vector<std::unique_ptr<ConvPlan>> plans;
  if (!graph_parts) return plans;
  const BackendDescriptor& graph = graph_parts->back();
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (BackendDescriptor& config : heuristic_engine_configs(graph, mode)) {
      const Engine engine = engine_of(config, problem);
      if (!engine.allowed) continue;
      BackendDescriptor execution_plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      execution_plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config)
          .set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      if (execution_plan.try_finalize() != CUDNN_STATUS_SUCCESS) continue;
      const auto workspace = static_cast<size_t>(execution_plan.get_int64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
      if (workspace > limit) continue;
      auto plan = std::make_unique<ConvPlan>();
      plan->direction = problem.direction;
      plan->graph_parts = graph_parts;
      plan->engine_config = std::move(config);
      plan->execution_plan = std::move(execution_plan);
      plan->engine = engine.index;
      plan->workspace_bytes = workspace;
      plan->coefficient_dtype = coefficients;
      plans.push_back(std::move(plan));
      if (first_only) return plans;
    }
    // Mode A's list is cuDNN's own ranking of what applies; the fallback list is only
    // wanted when mode A had nothing runnable.
    if (!plans.empty()) return plans;
  }
  return plans;
}

// Runs `plan` once; cuDNN's status, for callers that decide what a failure means.
cudnnStatus_t execute(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& data, void* workspace) {
  const BackendDescriptor pack = variant_pack(plan.direction, data, workspace);
  return cudnnBackendExecute(handle, plan.execution_plan.get(), pack.get());
}

// Milliseconds a run of `plan` takes on the device: the median of kRounds, each the mean
// of kRepeats runs queued behind a held stream (cuda/hold_stream.h), after one untimed
// run, which pays for any lazy kernel loading; infinity when cuDNN refuses to run it.
// NOTE: one run timed from an idle stream also measured the host's issue of it (a
// variant pack and a launch or more, against kernels of 10-300 us), which a training step
// hides, its host running ahead of the device: so timed, the chosen plans of a ResNet-50
// step summed to 4.55 ms, and 3.72 ms timed so (H200, 2026-12-03, commit 659e58c:
// docs/history/benchmarks.md).
float time_plan(cudnnHandle_t handle, Device device, const ConvPlan& plan, const ConvOperands& data) {
  Tensor workspace = borrow_workspace(plan.workspace_bytes, device);
  void* scratch = workspace.defined() ? workspace.raw_data() : nullptr;
  const Stream stream = Stream::current(device);
  if (execute(handle, plan, data, scratch) != CUDNN_STATUS_SUCCESS) {
    detail::forget_cudnn_error();
    return std::numeric_limits<float>::infinity();
  }
  constexpr int kRounds = 3, kRepeats = 4;
  constexpr int kHoldMicroseconds = 200;  // the host queues kRepeats runs meanwhile
  std::array<float, kRounds> times{};
  for (float& time : times) {
    Event start(/*enable_timing=*/true), end(/*enable_timing=*/true);
    hold_stream(stream, kHoldMicroseconds);
    start.record(stream);
    for (int i = 0; i < kRepeats; ++i) MG_CUDNN_CHECK(execute(handle, plan, data, scratch));
    end.record(stream);
    end.synchronize();
    time = Event::elapsed_ms(start, end) / kRepeats;
  }
  std::sort(times.begin(), times.end());
  return times[kRounds / 2];
}

// The answer "no engine runs this" (ConvPlan::runnable() false), cached like a plan.
std::unique_ptr<ConvPlan> no_engine(ConvDirection direction) {
  auto none = std::make_unique<ConvPlan>();
  none->direction = direction;
  return none;
}

// The dtypes the prologue's scale and bias may take, preferred first: float32, in which
// memgrad keeps batch norm's coefficients, else the data's own, in which NVIDIA's samples
// declare them (see conv_graph.cpp's prologue_of). Directions without a prologue build one graph, in which
// the dtype is not read.
std::vector<DType> coefficient_dtypes(const ConvProblem& problem) {
  if (problem.direction != ConvDirection::ForwardNormalizedStatistics) return {DType::Float32};
  return {DType::Float32, problem.dtype};
}

}  // namespace

std::unique_ptr<ConvPlan> choose_conv_plan(cudnnHandle_t handle, Device device, const ConvProblem& problem,
                                           bool benchmark, const ConvOperands& data) {
  std::vector<std::unique_ptr<ConvPlan>> plans;
  for (DType coefficients : coefficient_dtypes(problem)) {
    plans = runnable_plans(handle, problem, coefficients, cudnn_workspace_limit(), /*first_only=*/!benchmark);
    if (!plans.empty()) break;
  }
  if (plans.empty() && is_fused(problem.direction)) {
    return no_engine(problem.direction);
  }
  MG_CHECK(!plans.empty(), "cuDNN has no ", direction_name(problem.direction), " convolution engine for ",
           problem.dtype, " input ", problem.input, ", weight ", problem.weight, " (", problem.layout,
           ") with a workspace within cudnn_workspace_limit() = ", cudnn_workspace_limit(),
           " bytes", problem.deterministic ? " among the deterministic ones (set_cudnn_deterministic)" : "",
           ". Hint: raise it with set_cudnn_workspace_limit, or run the im2col path with "
           "set_cudnn_enabled(false), which is deterministic.");
  if (plans.size() == 1) return std::move(plans.front());
  // Benchmark: the fastest on the call's own tensors (the timing runs write only the
  // call's result tensor, which the call overwrites after them), except that an
  // accumulating call's result holds a gradient the runs must not add to: they write a
  // scratch tensor of its size instead.
  ConvOperands timed = data;
  Tensor scratch_result;
  if (problem.direction == ConvDirection::BackwardDataAccumulate) {
    scratch_result = borrow_workspace(static_cast<size_t>(problem.input.numel()) * element_size(problem.dtype), device);
    timed.input = scratch_result.raw_data();
  }
  std::optional<size_t> fastest;
  float fastest_ms = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < plans.size(); ++i) {
    const float ms = time_plan(handle, device, *plans[i], timed);
    if (ms < fastest_ms) {
      fastest_ms = ms;
      fastest = i;
    }
  }
  if (!fastest && is_fused(problem.direction)) {
    return no_engine(problem.direction);
  }
  MG_CHECK(fastest.has_value(), "cuDNN refused to run every one of the ", plans.size(), " ",
           direction_name(problem.direction), " convolution engines it offered for ", problem.dtype, " input ",
           problem.input, ", weight ", problem.weight, ". Hint: turn benchmark mode off (set_cudnn_benchmark(false)).");
  return std::move(plans[*fastest]);
}

void run_conv_plan(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& data, void* workspace) {
  MG_CUDNN_CHECK(execute(handle, plan, data, workspace));
}

Tensor borrow_workspace(size_t bytes, Device device) {
  if (bytes == 0) return Tensor();
  return empty({static_cast<int64_t>(bytes)},
               {.dtype = DType::UInt8, .device = device, .category = MemoryCategory::Workspace});
}

}  // namespace mg::cuda::cudnn
