// cuda/cudnn/conv_engines.h — choosing how cuDNN runs one convolution shape, and running it,
// through the backend (graph) API.
//
// A choice is made once per ConvKey (cuda/cudnn/algorithm_cache.h): the convolution is
// described as a graph (cuda/cudnn/conv_graph.h); cuDNN's heuristics (mode A, then the
// fallback list) rank the engine configurations that can run it; configurations whose
// numerical notes the settings forbid are dropped (float32 without allow_tf32: no tensor
// cores; inputs rounded down to a narrower type only where the prologue's float32 result
// feeds a 16-bit convolution; reductions in reduced precision only for 16-bit convolutions:
// the notes PyTorch drops, so both run the same engines); each remaining one is finalized
// into an execution plan. With benchmark off the first plan that
// finalizes within the workspace limit wins; with benchmark on every such plan is timed on
// the call's own tensors and the fastest wins. Running a plan is one variant pack (the
// call's pointers) and one cudnnBackendExecute.
#pragma once

#include <cudnn.h>

#include <memory>

#include "memgrad/core/tensor.h"
#include "memgrad/cuda/cudnn/algorithm_cache.h"
#include "memgrad/cuda/cudnn/conv_graph.h"

namespace mg::cuda::cudnn {

// Chooses the engine for `problem` (see above), running candidates on `data` only in
// benchmark mode. Throws mg::Error when no engine fits cudnn_workspace_limit(), except for
// the fused directions (ForwardStatistics, ForwardNormalizedStatistics,
// BackwardDataReluBatchNorm), whose answer is then a plan that is not runnable() (the caller
// runs the pieces apart).
// ForwardNormalizedStatistics' scale and bias are float32 where cuDNN has an engine for
// that, else the data's dtype (ConvPlan::coefficient_dtype says which).
std::unique_ptr<ConvPlan> choose_conv_plan(cudnnHandle_t handle, Device device, const ConvProblem& problem,
                                           bool benchmark, const ConvOperands& data);

// Runs `plan` on `data` with `workspace` (plan.workspace_bytes bytes, or nullptr for none)
// on the handle's stream.
void run_conv_plan(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& data, void* workspace);

// Scratch memory from the caching allocator, tagged WORKSPACE; undefined for 0 bytes.
Tensor borrow_workspace(size_t bytes, Device device);

}  // namespace mg::cuda::cudnn
