// autograd/anomaly_mode.h — anomaly mode: which op's backward made the first NaN or Inf.
//
//   {
//     mg::autograd::DetectAnomalyGuard detect_anomaly;
//     Tensor loss = criterion(model(inputs), targets);
//     loss.backward();  // throws mg::Error at the first NaN or Inf gradient
//   }
//
// While it is on, every node recorded in forward remembers where it came from: its forward
// op, the module path ("layer3.1.conv2", kept by the memory context, memory/context.h)
// and, when a memory::Recorder runs, the training step. In backward, every gradient a node
// returns is checked; the first with a NaN or an Inf throws mg::Error naming the backward
// node, which input's gradient it is (index, shape, dtype, device), where the node came from
// and what usually causes it. As in PyTorch, a NaN in forward is no error by itself: it is
// found where it first reaches a gradient (the hint says so).
//
// Cost: off (the default), recording a node reads one relaxed atomic and the engine takes
// one branch per node. On, module calls keep the memory context, each node keeps its origin,
// and each gradient is reduced to its largest magnitude and read by the host: on a GPU a
// device reduction and a sync per gradient. docs/debugging.md has the measured figures.
//
// NOTE: the switch is process-wide, as PyTorch's (torch.autograd.set_detect_anomaly):
// "where does this NaN come from" is a question about the program, and a graph recorded on
// one thread and run backward on another (a user's worker thread) must be checked, and its
// nodes must know their origin, under the same setting. Guards nest, each restoring the value
// it found; guards on threads whose lifetimes overlap should not disagree, as in PyTorch.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg::autograd {

class Node;

namespace detail {
extern std::atomic<bool> anomaly_enabled;
}

inline bool is_anomaly_enabled() { return detail::anomaly_enabled.load(std::memory_order_relaxed); }
// As torch.autograd.set_detect_anomaly(mode); prefer the guard, which restores the setting.
void set_anomaly_enabled(bool enabled);

// Sets anomaly mode to `enabled` for its lifetime, then restores the value it found.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true) : previous_(is_anomaly_enabled()) { set_anomaly_enabled(enabled); }
  ~DetectAnomalyGuard() { set_anomaly_enabled(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

// Where in forward a node was recorded; nodes recorded under anomaly mode keep one.
struct ForwardOrigin {
  // Labels of the memory context (memory/context.h), 0 when empty: an OpScope around
  // the op ("scaled_dot_product_attention[math]" for a softmax inside it) and the module path.
  uint32_t enclosing_op = 0;
  uint32_t module = 0;
  std::optional<int64_t> step;  // the running memory::Recorder's step
};

// The calling thread's origin now, for a node being recorded.
ForwardOrigin current_forward_origin();

// Throws mg::Error if one of `grad_inputs`, the gradients `node` has just returned, holds a
// NaN or an Inf. The engine calls it after each node while anomaly mode is on.
void check_gradients(const Node& node, const std::vector<Tensor>& grad_inputs);

}  // namespace mg::autograd
