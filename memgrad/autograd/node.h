// autograd/node.h — Node and Edge: the recorded graph.
//
// Each differentiable op that runs with grad mode on and an input that requires grad
// creates one Node. The node's edges point to the nodes that produced its inputs (or to
// the AccumulateGrad node of a leaf); its apply() turns gradients of its outputs into
// gradients of its inputs. Nodes hold exactly the SavedTensors their backward needs and
// release them when the engine says so.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg::autograd {

class Node;
struct ForwardOrigin;  // autograd/anomaly_mode.h

struct Edge {
  std::shared_ptr<Node> function;  // null: this input needs no gradient
  uint32_t input_nr = 0;           // which output of `function` the input was
};

class Node {
 public:
  Node(const char* name, uint32_t num_outputs = 1);
  // Releases the graph behind this node iteratively: freeing a 10,000-op chain must not
  // recurse 10,000 destructors deep.
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the inputs (one per edge; undefined where none flows) from gradients of
  // the outputs (one per output; undefined means zero).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  // Drops saved tensors; called right after apply() unless retain_graph.
  virtual void release_saved() {}
  // Whether the node may run on the backward's side stream (autograd/side_stream.h) when
  // every gradient it gets was made there: it holds no tensor from forward that could be
  // freed under the side stream's work, and runs no hook, whose code could read tensors
  // the main stream has not finished. No, unless a node says otherwise.
  virtual bool may_run_on_side_stream() const { return false; }

  const char* name() const { return name_; }
  uint32_t num_outputs() const { return num_outputs_; }
  // Creation order: the engine runs later nodes first, which frees memory soonest.
  uint64_t sequence_nr() const { return sequence_nr_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  bool needs_input_grad(size_t index) const {
    return index < next_edges_.size() && next_edges_[index].function != nullptr;
  }

  // Hooks on a non-leaf tensor live on its producing node, so they run even when the
  // tensor itself is gone by the time backward runs.
  void add_output_hook(uint32_t output_nr, TensorHook hook);
  // Non-leaf tensors that asked for .grad (retain_grad()).
  void add_retained_output(uint32_t output_nr, std::weak_ptr<TensorImpl> tensor);
  // Runs hooks and fills retained .grad for the gradients of this node's outputs.
  void run_output_hooks(std::vector<Tensor>& grad_outputs);
  // Whether hooks or retain_grad() see the gradients of this node's outputs.
  bool has_output_observers() const { return !output_hooks_.empty() || !retained_outputs_.empty(); }

  // Where in forward this node was recorded, for anomaly mode's errors; null unless anomaly
  // mode was on when it was.
  const ForwardOrigin* forward_origin() const { return forward_origin_.get(); }

 protected:
  // Marks this node as having a larger sequence number than any other (AccumulateGrad
  // runs as soon as it is ready, releasing gradient buffers early).
  void run_first() { sequence_nr_ = UINT64_MAX; }

 private:
  const char* name_;
  uint32_t num_outputs_;
  uint64_t sequence_nr_;
  std::vector<Edge> next_edges_;
  std::vector<std::pair<uint32_t, TensorHook>> output_hooks_;
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained_outputs_;
  std::unique_ptr<const ForwardOrigin> forward_origin_;
};

// The edge along which gradient reaches `tensor` (its grad_fn, or its leaf's
// AccumulateGrad node, created on first use); an empty edge if it needs no gradient.
Edge gradient_edge(const Tensor& tensor);

}  // namespace mg::autograd
