// cuda/cudnn/attention_plans.cpp — choosing, caching and running cuDNN's fused attention
// plans (see the header).
#include "memgrad/cuda/cudnn/attention_plans.h"

#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "memgrad/cuda/cudnn/check.h"
#include "memgrad/cuda/cudnn/conv_engines.h"
#include "memgrad/cuda/cudnn/handle.h"
#include "memgrad/cuda/cudnn/settings.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda::cudnn {

namespace {

struct Cache {
  std::mutex mutex;
  std::unordered_map<AttentionKey, std::unique_ptr<AttentionPlan>, AttentionKeyHash> plans;
};
Cache& cache() {
  static auto* all = new Cache;  // leaked on purpose, as the convolution's (algorithm_cache.cpp)
  return *all;
}

std::unique_ptr<AttentionPlan> choose_plan(cudnnHandle_t handle, const AttentionProblem& problem) {
  auto plan = std::make_unique<AttentionPlan>();
  plan->graph = attention_graph(handle, problem);
  if (!plan->graph) return plan;  // cuDNN cannot describe it: not runnable
  plan->scratch_bytes = attention_graph_scratch_bytes(problem);
  const bool deterministic = problem.direction == AttentionDirection::Backward && problem.deterministic;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (BackendDescriptor& config : heuristic_engine_configs(plan->graph->graph(), mode)) {
      const EngineFacts facts = engine_facts(config);
      if (deterministic && facts.has_note(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)) continue;
      BackendDescriptor execution_plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      execution_plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config)
          .set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      if (execution_plan.try_finalize() != CUDNN_STATUS_SUCCESS) continue;
      const auto workspace = static_cast<size_t>(execution_plan.get_int64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
      if (attention_graph_scratch_offset(workspace) + plan->scratch_bytes > cudnn_workspace_limit()) continue;
      plan->engine_config = std::move(config);
      plan->execution_plan = std::move(execution_plan);
      plan->engine = facts.index;
      plan->workspace_bytes = workspace;
      return plan;
    }
  }
  return plan;
}

}  // namespace

const AttentionPlan& attention_plan(const AttentionProblem& problem, Device device) {
  const AttentionKey key = make_attention_key(problem, device);
  Cache& all = cache();
  {
    std::lock_guard lock(all.mutex);
    auto found = all.plans.find(key);
    if (found != all.plans.end()) return *found->second;
  }
  // Chosen outside the lock (finalizing may compile a kernel); if another thread cached
  // the same key meanwhile, its plan wins.
  std::unique_ptr<AttentionPlan> plan = choose_plan(cudnn_handle(device, current_stream(device)), problem);
  std::lock_guard lock(all.mutex);
  return *all.plans.try_emplace(key, std::move(plan)).first->second;
}

void run_attention_plan(const AttentionPlan& plan, const AttentionProblem& problem, Device device,
                        const AttentionOperands& data, float scale) {
  MG_ASSERT(plan.runnable(), "run_attention_plan: the plan has no engine");
  Tensor workspace =
      borrow_workspace(attention_graph_scratch_offset(plan.workspace_bytes) + plan.scratch_bytes, device);
  void* scratch = workspace.defined() ? workspace.raw_data() : nullptr;
  const BackendDescriptor pack = attention_variant_pack(problem, data, scale, scratch, plan.workspace_bytes);
  cudnnHandle_t handle = cudnn_handle(device, current_stream(device));
  MG_CUDNN_CHECK(cudnnBackendExecute(handle, plan.execution_plan.get(), pack.get()));
}

size_t attention_plan_cache_size() {
  Cache& all = cache();
  std::lock_guard lock(all.mutex);
  return all.plans.size();
}

void clear_attention_plan_cache() {
  Cache& all = cache();
  std::lock_guard lock(all.mutex);
  all.plans.clear();
}

}  // namespace mg::cuda::cudnn
