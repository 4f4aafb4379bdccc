// autograd/selective_checkpoint.h — how a kept op (autograd/checkpoint_policy.h) stores its
// outputs during a selective checkpoint's forward and takes them back during the recompute.
//
// An op whose kind a policy may keep wraps the allocation of its outputs and its kernel:
//
//   Tensor out = autograd::kept_or_computed(OpKind::Matmul, "matmul", out_sizes, dtype, [&] {
//     Tensor out = new_output(out_sizes, dtype, a);
//     kernels(a.device()).matmul(..., out);
//     return out;  // or a std::vector<Tensor> of every result backward needs
//   });
//   if (needs_grad(a, b)) record(...);  // as always: the recompute builds the node again
//
// Outside checkpoints that is compute() and nothing more (one thread-local read). Inside a
// selective checkpoint's forward, each result is also kept by the checkpoint's node (a
// SavedTensor: ACTIVATION); in its recompute for backward, the op's results are the kept
// ones, in the forward's order, and compute() does not run. Work outside compute() runs
// both times: what the op draws from a generator, in particular, must be drawn outside it,
// so that the ops after it draw what they drew at the forward.
//
// The order is the identity: the recompute's n-th kept op must be the forward's n-th, with
// the same op name and the same first output's sizes and dtype, and the recompute must run
// as many kept ops as the forward did; otherwise an mg::Error says which one differs.
//
// Nesting: scopes stack on the thread. A recompute replays into the checkpoint that kept
// the results; a checkpoint nested in it that keeps the same kind takes the replayed
// result and keeps it for its own recompute (it costs no kernel either).
#pragma once

#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "memgrad/autograd/checkpoint_policy.h"
#include "memgrad/autograd/saved_tensor.h"
#include "memgrad/core/tensor.h"

namespace mg::autograd {

// One kept op's results, as the forward stored them.
struct KeptResult {
  OpKind kind;
  const char* op;  // the op's name, for the order check ("matmul", "linear", "conv2d", ...)
  Shape sizes;     // the first result's sizes and dtype, for the order check
  DType dtype;
  std::vector<SavedTensor> results;
};

// What a selective checkpoint's node keeps for its recompute.
using KeptResults = std::vector<KeptResult>;

namespace selective {
// One keeping or replaying scope; they stack on the thread.
struct Frame {
  const CheckpointPolicy* policy;
  KeptResults* kept;
  bool replaying;
  bool release;      // replaying: drop each result from `kept` once taken
  size_t next = 0;   // replaying: the index of the next result to take
  Frame* outer = nullptr;
};
extern thread_local Frame* innermost_frame;
}  // namespace selective

// During a selective checkpoint's forward: the kept ops of `policy` append to `kept`.
// `policy` and `kept` must outlive the scope.
class KeepScope {
 public:
  KeepScope(const CheckpointPolicy& policy, KeptResults& kept);
  ~KeepScope();
  KeepScope(const KeepScope&) = delete;
  KeepScope& operator=(const KeepScope&) = delete;

 private:
  selective::Frame frame_;
};

// During its recompute: the kept ops of `policy` take their results from `kept`, in order.
// With `release`, each result is dropped from `kept` once taken (the recomputed graph then
// holds it as long as its nodes need it); without, `kept` stays whole for another backward.
class ReplayScope {
 public:
  ReplayScope(const CheckpointPolicy& policy, KeptResults& kept, bool release);
  ~ReplayScope();
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;
  // Throws mg::Error unless the recompute took every kept result (call when fn returned).
  void check_all_replayed() const;

 private:
  selective::Frame frame_;
};

namespace selective {
// The results a replaying scope holds for this op, or nothing when none replays `kind`.
std::optional<std::vector<Tensor>> take_kept(OpKind kind, const char* op, const Shape& sizes, DType dtype);
// Keeps `results` in every keeping scope (inside the replaying one, if any) whose policy keeps `kind`.
void keep(OpKind kind, const char* op, const std::vector<Tensor>& results);
}  // namespace selective

// See the top of this file. Compute returns a Tensor or a std::vector<Tensor>; the result
// has the same type. `sizes` and `dtype` are those of compute()'s (first) result.
template <class Compute>
std::invoke_result_t<Compute> kept_or_computed(OpKind kind, const char* op, const Shape& sizes, DType dtype,
                                               Compute&& compute) {
  using Result = std::invoke_result_t<Compute>;
  static_assert(std::is_same_v<Result, Tensor> || std::is_same_v<Result, std::vector<Tensor>>,
                "kept_or_computed: compute must return a Tensor or a std::vector<Tensor>");
  if (selective::innermost_frame == nullptr) return compute();
  std::vector<Tensor> results;
  if (std::optional<std::vector<Tensor>> kept = selective::take_kept(kind, op, sizes, dtype)) {
    results = std::move(*kept);
  } else if constexpr (std::is_same_v<Result, Tensor>) {
    results.push_back(compute());
  } else {
    results = compute();
  }
  selective::keep(kind, op, results);
  if constexpr (std::is_same_v<Result, Tensor>) {
    return results.front();
  } else {
    return results;
  }
}

}  // namespace mg::autograd
