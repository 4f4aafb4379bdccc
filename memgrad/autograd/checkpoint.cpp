// autograd/checkpoint.cpp — the checkpointed forward and its recomputing backward node.
#include "memgrad/autograd/checkpoint.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/saved_tensor.h"
#include "memgrad/autograd/selective_checkpoint.h"
#include "memgrad/memory/context.h"
#include "memgrad/memory/recorder.h"
#include "memgrad/core/random.h"

namespace mg {

namespace autograd {

namespace {

thread_local bool recomputing = false;

// The conditions of the forward, for as long as fn runs again: grad mode on, the default
// generator where it stood at the forward, the forward's autocast state (so the recomputed
// outputs have the forward's dtypes) and memory context, is_recomputing() true. The destructor puts
// everything back (also when fn throws), so the step's later dropout masks stay where an
// unchecked run would draw them.
class RecomputeScope {
 public:
  RecomputeScope(PhiloxState forward_rng, const amp::AutocastState& forward_autocast,
                 const memory::detail::Context& forward_context)
      : autocast_(forward_autocast),
        memory_context_(forward_context),
        outer_rng_(default_generator().state()),
        was_recomputing_(recomputing) {
    default_generator().set_state(forward_rng);
    recomputing = true;
  }
  ~RecomputeScope() {
    default_generator().set_state(outer_rng_);
    recomputing = was_recomputing_;
  }
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  EnableGradGuard grad_on_;
  amp::AutocastStateGuard autocast_;
  // For a running memory::Recorder: the recomputed allocations get the forward's module
  // path ("layer1.0.conv1"), not the backward node's.
  memory::ContextScope memory_context_;
  PhiloxState outer_rng_;
  bool was_recomputing_;
};

struct OutputSignature {
  Shape sizes;
  DType dtype = DType::Float32;
  bool defined = false;
};

OutputSignature signature_of(const Tensor& output) {
  return output.defined() ? OutputSignature{output.sizes(), output.dtype(), true} : OutputSignature{};
}

std::string describe(const OutputSignature& output) {
  return output.defined ? detail::str_cat(output.sizes, " ", output.dtype) : std::string("undefined");
}

class CheckpointBackward final : public Node {
 public:
  CheckpointBackward(CheckpointFunction fn, std::vector<SavedTensor>&& inputs, std::vector<OutputSignature> outputs,
                     const CheckpointPolicy& policy, KeptResults&& kept, PhiloxState forward_rng,
                     const amp::AutocastState& forward_autocast, const memory::detail::Context& forward_context)
      : Node(policy.keeps_nothing() ? "CheckpointBackward" : "SelectiveCheckpointBackward",
             static_cast<uint32_t>(outputs.size())),
        fn_(std::move(fn)),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        policy_(policy),
        kept_(std::move(kept)),
        forward_rng_(forward_rng),
        forward_autocast_(forward_autocast),
        forward_context_(forward_context) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override {
    MG_CHECK(!released_, "trying to backward through the graph a second time: ", name(), "'s saved inputs "
             "were already freed by the first backward(). Hint: pass retain_graph=true to the first backward() "
             "if you need to backward twice, or run the checkpointed forward again.");
    bool any_gradient = std::any_of(grad_outputs.begin(), grad_outputs.end(),
                                    [](const Tensor& grad) { return grad.defined(); });
    if (!any_gradient) return std::vector<Tensor>(inputs_.size());  // nothing to recompute for
    // Fresh leaves over the saved inputs: the nested backward stops at them, and their .grad
    // is this node's gradient for each input.
    std::vector<Tensor> leaves(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) {
      Tensor saved = inputs_[i].unpack(name());
      if (!saved.defined()) continue;
      leaves[i] = detach(saved);
      if (needs_input_grad(i)) leaves[i].requires_grad_(true);
    }
    std::vector<Tensor> recomputed;
    {
      RecomputeScope scope(forward_rng_, forward_autocast_, forward_context_);
      // The kept results go to the recomputed graph as they are taken, unless a later
      // backward will recompute again.
      std::optional<ReplayScope> replay;
      if (!policy_.keeps_nothing()) replay.emplace(policy_, kept_, /*release=*/!retains_graph());
      recomputed = fn_(leaves);
      if (replay) replay->check_all_replayed();
    }
    check_same_outputs(recomputed);

    std::vector<Tensor> roots, seeds;
    for (size_t i = 0; i < recomputed.size(); ++i) {
      if (!grad_outputs[i].defined() || !recomputed[i].defined() || !recomputed[i].requires_grad()) continue;
      roots.push_back(recomputed[i]);
      seeds.push_back(std::move(grad_outputs[i]));
    }
    // NOTE: the roots and seeds are moved into backward and `recomputed` is dropped first,
    // so that the recomputed outputs and their gradients (for a ResNet-50 stage, hundreds of
    // MB each) are freed as soon as the first node has used them, not held through the
    // whole nested backward.
    recomputed.clear();
    if (!roots.empty()) {
      check_graph_is_local(roots);
      backward(std::move(roots), std::move(seeds));
    }

    std::vector<Tensor> grad_inputs(inputs_.size());
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!leaves[i].defined() || !needs_input_grad(i)) continue;
      grad_inputs[i] = leaves[i].grad();
      // A gradient in flight, not a leaf's .grad (which is what AccumulateGrad tagged it).
      if (grad_inputs[i].defined()) grad_inputs[i].set_memory_category(MemoryCategory::Temporary);
    }
    return grad_inputs;
  }

  void release_saved() override {
    for (SavedTensor& input : inputs_) input.release();
    kept_.clear();
    fn_ = nullptr;  // fn may hold modules or tensors alive through its captures
    released_ = true;
  }

 private:
  void check_same_outputs(const std::vector<Tensor>& recomputed) const {
    bool same = recomputed.size() == outputs_.size();
    for (size_t i = 0; same && i < recomputed.size(); ++i) {
      const Tensor& output = recomputed[i];
      same = output.defined() == outputs_[i].defined &&
             (!output.defined() || (output.sizes() == outputs_[i].sizes && output.dtype() == outputs_[i].dtype));
    }
    if (same) return;
    std::string forward_text, recomputed_text;
    for (const OutputSignature& output : outputs_) forward_text += detail::str_cat(" ", describe(output));
    for (const Tensor& output : recomputed) recomputed_text += detail::str_cat(" ", describe(signature_of(output)));
    MG_CHECK(false, "checkpoint: the function returned different outputs when recomputed for backward (",
             recomputed.size(), ":", recomputed_text, ") than at the forward (", outputs_.size(), ":", forward_text,
             "). Hint: a checkpointed function must compute the same thing every time it is called; "
             "do not let it depend on state that changes between the forward and backward.");
  }

  // Every node of the recomputed graph was created after this one; a node created before
  // it belongs to the outer graph, which the nested backward must not run (the outer
  // backward will, with all of its gradient). Leaves' AccumulateGrad nodes sort last.
  void check_graph_is_local(const std::vector<Tensor>& roots) const {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    for (const Tensor& root : roots) {
      Node* node = root.grad_fn().get();
      if (node && seen.insert(node).second) stack.push_back(node);
    }
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      MG_CHECK(node->sequence_nr() > sequence_nr(), "checkpoint: the function uses a tensor that was computed "
               "outside it and requires grad (its gradient would flow into ", node->name(),
               ", recorded before the checkpoint). Hint: pass that tensor to checkpoint as an input; the function "
               "may capture only leaves such as parameters.");
      for (const Edge& edge : node->next_edges()) {
        if (edge.function && seen.insert(edge.function.get()).second) stack.push_back(edge.function.get());
      }
    }
  }

  CheckpointFunction fn_;
  std::vector<SavedTensor> inputs_;  // (possibly undefined) fn's inputs, as at the forward
  std::vector<OutputSignature> outputs_;
  CheckpointPolicy policy_;
  KeptResults kept_;  // the kept ops' results, in the forward's order
  PhiloxState forward_rng_;
  amp::AutocastState forward_autocast_;
  memory::detail::Context forward_context_;
  bool released_ = false;
};

}  // namespace

bool is_recomputing() { return recomputing; }

}  // namespace autograd

std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs,
                               const CheckpointPolicy& keep) {
  MG_CHECK(fn != nullptr, "checkpoint: got an empty function");
  if (!GradMode::is_enabled()) return fn(inputs);

  // Saved before fn runs, so that fn changing an input in place is caught at backward (the
  // recompute would start from the changed values).
  std::vector<autograd::SavedTensor> saved_inputs;
  saved_inputs.reserve(inputs.size());
  for (const Tensor& input : inputs) saved_inputs.emplace_back(input);
  PhiloxState forward_rng = default_generator().state();
  std::vector<Tensor> outputs;
  autograd::KeptResults kept;
  {
    NoGradGuard no_grad;
    std::optional<autograd::KeepScope> keeping;
    if (!keep.keeps_nothing()) keeping.emplace(keep, kept);
    outputs = fn(inputs);
  }

  std::vector<autograd::OutputSignature> signatures;
  signatures.reserve(outputs.size());
  for (const Tensor& output : outputs) signatures.push_back(autograd::signature_of(output));
  // NOTE: created after fn ran, so its sequence number is later than that of any node fn
  // could have captured (check_graph_is_local relies on it).
  auto node = std::make_shared<autograd::CheckpointBackward>(fn, std::move(saved_inputs), std::move(signatures), keep,
                                                             std::move(kept), forward_rng, amp::autocast_state(),
                                                             memory::saved_context());
  // For a running memory::Recorder, as autograd::connect does for other ops: fn's forward
  // allocations are the checkpoint's, and its node belongs to the current module.
  if (memory::detail::recording()) memory::detail::label_forward_op(node.get(), node->name());
  std::vector<autograd::Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& input : inputs) edges.push_back(autograd::gradient_edge(input));
  node->set_next_edges(std::move(edges));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || !is_floating(outputs[i].dtype())) continue;
    // A new handle: fn may have returned an input or a parameter, whose history must stay.
    outputs[i] = detach(outputs[i]);
    AutogradMeta& meta = outputs[i].ensure_autograd_meta();
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
  }
  return outputs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor& input)>& fn, const Tensor& input,
                  const CheckpointPolicy& keep) {
  MG_CHECK(fn != nullptr, "checkpoint: got an empty function");
  // NOTE: fn by value: the node keeps this wrapper until backward.
  return checkpoint([fn](const std::vector<Tensor>& inputs) { return std::vector<Tensor>{fn(inputs[0])}; },
                    {input}, keep)[0];
}

}  // namespace mg
