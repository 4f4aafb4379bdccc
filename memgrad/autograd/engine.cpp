// autograd/engine.cpp — the backward pass.
#include "memgrad/autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/anomaly_mode.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/side_stream.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/context.h"

namespace mg::autograd {

namespace {

struct PendingNode {
  int dependencies = 0;                // edges into the node not yet delivered
  std::vector<Tensor> grad_outputs;    // sums of the gradients delivered so far
  std::vector<bool> made_on_side;      // which of them a side stream made (autograd/side_stream.h)
};
using PendingNodes = std::unordered_map<Node*, PendingNode>;

// The backward calls running on this thread (more than one when a node runs a nested
// backward), the callbacks queued for the outermost's end, and the innermost call's
// gradients delivered so far (what take_delivered_gradient hands over) and whether it
// retains the graph.
struct BackwardCalls {
  int depth = 0;
  std::vector<std::function<void()>> callbacks;
  PendingNodes* pending = nullptr;
  bool retain_graph = false;
};
thread_local BackwardCalls backward_calls;

// One backward() call: counted while it runs; the outermost runs the queued callbacks when
// it finishes, and drops them however it ends.
class BackwardCall {
 public:
  BackwardCall(PendingNodes& pending, bool retain_graph)
      : outer_pending_(backward_calls.pending), outer_retain_graph_(backward_calls.retain_graph) {
    ++backward_calls.depth;
    backward_calls.pending = &pending;
    backward_calls.retain_graph = retain_graph;
  }
  ~BackwardCall() {
    backward_calls.pending = outer_pending_;
    backward_calls.retain_graph = outer_retain_graph_;
    if (--backward_calls.depth == 0) {
      backward_calls.callbacks.clear();
      // A backward that threw may have left work on a side stream: whatever the caller
      // does next on the main stream must come after it.
      try {
        join_side_streams();
      } catch (...) {  // NOTE: a destructor must not throw; the device's error resurfaces at its next use
      }
    }
  }
  BackwardCall(const BackwardCall&) = delete;
  BackwardCall& operator=(const BackwardCall&) = delete;

  void run_callbacks() {
    if (backward_calls.depth != 1) return;
    // By index: a callback may queue another.
    for (size_t i = 0; i < backward_calls.callbacks.size(); ++i) {
      std::function<void()> callback = std::move(backward_calls.callbacks[i]);
      callback();
    }
    backward_calls.callbacks.clear();
  }

 private:
  PendingNodes* outer_pending_;
  bool outer_retain_graph_;
};

struct ReadyOrder {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Counts, into `pending`, for every node reachable from the roots, how many edges lead into it.
void count_dependencies(const std::vector<Edge>& root_edges, PendingNodes& pending) {
  std::vector<Node*> stack;
  for (const Edge& edge : root_edges) {
    if (!edge.function) continue;
    auto [it, inserted] = pending.try_emplace(edge.function.get());
    if (inserted) stack.push_back(edge.function.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& edge : node->next_edges()) {
      if (!edge.function) continue;
      auto [it, inserted] = pending.try_emplace(edge.function.get());
      ++it->second.dependencies;
      if (inserted) stack.push_back(edge.function.get());
    }
  }
}

void deliver(PendingNode& target, uint32_t input_nr, uint32_t num_outputs, Tensor grad, bool made_on_side = false) {
  if (target.grad_outputs.empty()) {
    target.grad_outputs.resize(num_outputs);
    target.made_on_side.resize(num_outputs);
  }
  Tensor& slot = target.grad_outputs[input_nr];
  if (!slot.defined()) {
    slot = std::move(grad);
    target.made_on_side[input_nr] = made_on_side;
    return;
  }
  // The sum runs on the main stream, after the side stream's work that made either term.
  if (made_on_side || target.made_on_side[input_nr]) join_side_streams();
  slot = add(slot, grad);
  target.made_on_side[input_nr] = false;
}

// Whether `node` runs on a side stream, and which device's: where every gradient delivered
// to it was made on one device's side stream and the node may run there. A node that reads
// such a gradient but does not run there first waits for the side streams (a join).
struct StreamChoice {
  bool on_side = false;
  Device device;
};
StreamChoice choose_stream(const Node& node, const PendingNode& state, const std::vector<Tensor>& grad_outputs) {
  bool any_on_side = false, all_on_side = true;
  Device device;
  for (size_t i = 0; i < grad_outputs.size(); ++i) {
    if (!grad_outputs[i].defined()) continue;
    const bool on_side = i < state.made_on_side.size() && state.made_on_side[i];
    if (on_side && any_on_side && grad_outputs[i].device() != device) all_on_side = false;
    if (on_side) {
      any_on_side = true;
      device = grad_outputs[i].device();
    } else {
      all_on_side = false;
    }
  }
  const StreamChoice choice{any_on_side && all_on_side && node.may_run_on_side_stream(), device};
  if (any_on_side && !choice.on_side) join_side_streams();
  return choice;
}

}  // namespace

void backward(std::vector<Tensor> roots, std::vector<Tensor> grad_roots, bool retain_graph) {
  MG_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), "backward: got ", roots.size(),
           " tensors but ", grad_roots.size(), " gradients");
  NoGradGuard no_grad;
  memory::PhaseScope backward_phase(memory::Phase::Backward);
  PendingNodes pending;
  BackwardCall call(pending, retain_graph);
  // NOTE: no autocast in backward, even when called inside an autocast region: each
  // gradient keeps the dtype its forward op chose (a float32 sum in a gradient formula
  // must not turn a bfloat16 input's gradient into float32).
  amp::AutocastStateGuard no_autocast(amp::AutocastState{});
  std::vector<Edge> root_edges;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    MG_CHECK(root.defined() && root.requires_grad(), "backward: the tensor",
             root.defined() ? " of shape " + root.sizes().str() : std::string(),
             " does not require grad and has no grad_fn. Hint: did you create it under "
             "NoGradGuard, or forget requires_grad_() on the inputs?");
    Tensor seed = i < grad_roots.size() ? grad_roots[i] : Tensor();
    if (!seed.defined()) {
      MG_CHECK(root.numel() == 1, "backward: a gradient can be created implicitly only for "
               "one-element outputs, but the output has shape ", root.sizes(),
               ". Hint: reduce it (e.g. .sum()) or pass a gradient of the same shape.");
      seed = ones_like(root);
    }
    MG_CHECK(seed.sizes() == root.sizes(), "backward: the gradient has shape ", seed.sizes(),
             " but the output has shape ", root.sizes());
    root_edges.push_back(gradient_edge(root));
    root_grads.push_back(std::move(seed));
  }
  // The edges hold what backward needs of the roots; the seeds now live in root_grads only.
  roots.clear();
  grad_roots.clear();

  count_dependencies(root_edges, pending);
  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  for (size_t i = 0; i < root_edges.size(); ++i) {
    Node* node = root_edges[i].function.get();
    deliver(pending[node], root_edges[i].input_nr, node->num_outputs(), std::move(root_grads[i]));
  }
  for (const Edge& edge : root_edges) {
    PendingNode& state = pending[edge.function.get()];
    if (state.dependencies == 0) {
      state.dependencies = -1;  // queued once even if several roots share it
      ready.push(edge.function.get());
    }
  }

  const bool detect_anomaly = is_anomaly_enabled();  // read once: one branch per node below
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    // The node's gradients, the saved tensors it releases and the fan-in sums of what it
    // delivers are all its memory, in the module that recorded it.
    memory::NodeScope node_scope(node, node->name());
    PendingNode& state = pending[node];
    std::vector<Tensor> grad_outputs = std::move(state.grad_outputs);
    grad_outputs.resize(node->num_outputs());
    const StreamChoice stream = choose_stream(*node, state, grad_outputs);
    std::vector<Tensor> grad_inputs;
    std::vector<bool> made_on_side;
    {
      NodeStreamScope streams(stream.on_side, stream.device);
      node->run_output_hooks(grad_outputs);
      grad_inputs = node->apply(std::move(grad_outputs));
      made_on_side.resize(grad_inputs.size());
      for (size_t i = 0; i < grad_inputs.size(); ++i) made_on_side[i] = streams.made_on_side_stream(i);
    }
    if (detect_anomaly) check_gradients(*node, grad_inputs);
    if (!retain_graph) node->release_saved();
    const std::vector<Edge>& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& edge = edges[i];
      if (!edge.function) continue;
      PendingNode& target = pending[edge.function.get()];
      if (i < grad_inputs.size() && grad_inputs[i].defined()) {
        deliver(target, edge.input_nr, edge.function->num_outputs(), std::move(grad_inputs[i]), made_on_side[i]);
      }
      if (--target.dependencies == 0) ready.push(edge.function.get());
    }
  }
  join_side_streams();
  call.run_callbacks();
}

void queue_callback(std::function<void()> callback) {
  MG_CHECK(in_backward(), "queue_callback: no backward is running on this thread; a callback "
           "queued for the end of backward must be queued from inside it (a node or a hook).");
  backward_calls.callbacks.push_back(std::move(callback));
}

bool in_backward() { return backward_calls.depth > 0; }

bool in_outermost_backward() { return backward_calls.depth == 1; }

bool retains_graph() { return backward_calls.depth > 0 && backward_calls.retain_graph; }

Tensor take_delivered_gradient(const Node& node, size_t index, const Shape& sizes, MemoryFormat format, DType dtype,
                               Device device) {
  if (backward_calls.pending == nullptr || index >= node.next_edges().size()) return Tensor();
  const Edge& edge = node.next_edges()[index];
  if (!edge.function) return Tensor();
  const auto target = backward_calls.pending->find(edge.function.get());
  if (target == backward_calls.pending->end() || edge.input_nr >= target->second.grad_outputs.size()) {
    return Tensor();
  }
  // NOTE: a gradient a side stream made may still be in the making: not the main stream's to add into.
  if (target->second.made_on_side[edge.input_nr]) return Tensor();
  Tensor& delivered = target->second.grad_outputs[edge.input_nr];
  // NOTE: one handle and one storage owner: nothing else can see the in-place sum (a node
  // may hand the same gradient to two inputs, as AddBackward does, and a hook may keep one).
  const bool only_here = delivered.defined() && delivered.impl_ptr().use_count() == 1 &&
                         delivered.storage().use_count() == 1;
  if (!only_here || delivered.dtype() != dtype || delivered.device() != device || delivered.sizes() != sizes ||
      delivered.strides() != strides_for(sizes, format)) {
    return Tensor();
  }
  return std::move(delivered);  // the slot is empty again: the node's result fills it
}

bool is_sole_consumer(const Node& node, size_t index) {
  if (backward_calls.pending == nullptr || index >= node.next_edges().size()) return false;
  const Edge& edge = node.next_edges()[index];
  if (!edge.function || edge.function->has_output_observers()) return false;
  const auto target = backward_calls.pending->find(edge.function.get());
  if (target == backward_calls.pending->end() || target->second.dependencies != 1) return false;
  const std::vector<Tensor>& delivered = target->second.grad_outputs;
  return edge.input_nr >= delivered.size() || !delivered[edge.input_nr].defined();
}

}  // namespace mg::autograd
