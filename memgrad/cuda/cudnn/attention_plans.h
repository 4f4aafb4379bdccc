// cuda/cudnn/attention_plans.h — cuDNN's fused attention for one problem, chosen once and
// run with a variant pack: the plan cache of the attention graphs (cuda/cudnn/
// attention_graph.h), as cuda/cudnn/algorithm_cache.h is the convolution's.
//
// The choice: heuristics mode A, then the fallback list, first configuration that
// finalizes into an execution plan within cudnn_workspace_limit(); under a deterministic
// backward (AttentionProblem::deterministic) only engines without cuDNN's
// NONDETERMINISTIC note, on the graph without the dQ accumulator. No engine is an answer
// too, cached: the caller runs our kernels (or throws for a forced cuDNN engine).
//
// Memory: one WORKSPACE tensor from the caching allocator per run, the plan's workspace
// (cuDNN says how much only once a plan is finalized on a GPU) followed by the graph's
// float32 scratch (attention_graph_scratch_bytes: backward's D and dQ accumulator).
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "memgrad/core/device.h"
#include "memgrad/cuda/cudnn/attention_graph.h"
#include "memgrad/cuda/cudnn/backend_descriptor.h"
#include "memgrad/cuda/plan/attention_engine.h"

namespace mg::cuda::cudnn {

struct AttentionPlan {
  std::unique_ptr<AttentionGraph> graph;  // kept alive with the plan built from it
  BackendDescriptor engine_config;
  BackendDescriptor execution_plan;
  int64_t engine = -1;  // cuDNN's global engine index; -1: no engine runs this problem
  size_t workspace_bytes = 0;  // the execution plan's
  size_t scratch_bytes = 0;    // the graph's own, after it (attention_graph_scratch_offset)
  bool runnable() const { return engine >= 0; }
};

// The plan cached for `problem` on `device` (the device current, its stream the
// current one), chosen at the first call; never null, possibly not runnable().
const AttentionPlan& attention_plan(const AttentionProblem& problem, Device device);

// Runs a runnable `plan` on the device's current stream: borrows its workspace, binds
// `data` and the scale. Enqueues only (no host synchronisation), so a CUDA graph may
// capture it.
void run_attention_plan(const AttentionPlan& plan, const AttentionProblem& problem, Device device,
                        const AttentionOperands& data, float scale);

// Cached plans, for tests; clearing must not race a running attention call.
size_t attention_plan_cache_size();
void clear_attention_plan_cache();

}  // namespace mg::cuda::cudnn
