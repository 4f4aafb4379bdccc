// examples/memory_lab/kept_graphs.cpp — experiments "retain_graph" and "kept_losses": when
// does a training or evaluation loop hold on to every iteration's graph?
//
// A graph's saved tensors (ACTIVATION) are released by backward, unless retain_graph, and
// in any case when the last handle to the graph (the loss) dies. So what decides whether
// memory grows loop after loop is whether the loop keeps the losses, and whether the graphs
// it keeps still hold their saved tensors.
#include <vector>

#include <memgrad/autograd/loss.h>
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"
#include "examples/memory_lab/models.h"

namespace memory_lab {
namespace {

// Eight iterations of a two-hidden-layer MLP on 64 samples; one forward saves both ReLU
// outputs (2 x 64x512 x 4 B), and cross-entropy saves the logits (64x10 x 4 B), one
// log-sum-exp per row (64 x 4 B) and the count of targets (4 B).
constexpr int64_t kBatch = 64;
constexpr int kIterations = 8;
const MlpShape kShape{.inputs = 256, .hidden = {512, 512}, .classes = 10};
const int64_t kSavedPerForward = mlp_saved_bytes(kShape, kBatch);

// One way to write the loop.
struct Loop {
  bool backward;           // false: evaluation that forgot no_grad (forward only)
  bool retain_graph;       // backward(retain_graph=true)
  bool keep_loss_tensors;  // losses pushed into a vector; false: loss.item() kept instead
};

struct Growth {
  int64_t activation;  // ACTIVATION bytes held after the loop
  int64_t allocated;   // allocated bytes held after the loop
};

// What is still held after kIterations of `loop`, with the kept losses still alive.
Growth run_loop(const Loop& loop, mg::Device device) {
  auto model = make_mlp(kShape, device);
  const mg::Tensor inputs = make_inputs(kBatch, kShape.inputs, device);
  const mg::Tensor targets = make_targets(kBatch, kShape.classes, device);
  // One step first, so the gradients exist before the probe starts and are not counted.
  train_step_backward(*model, inputs, targets);
  MemoryProbe probe(device);
  std::vector<mg::Tensor> loss_tensors;
  std::vector<double> loss_values;
  for (int i = 0; i < kIterations; ++i) {
    mg::Tensor loss = mg::cross_entropy((*model)(inputs), targets);
    if (loop.backward) loss.backward({}, loop.retain_graph);
    if (loop.keep_loss_tensors) {
      loss_tensors.push_back(loss);
    } else {
      loss_values.push_back(loss.item());
    }
  }
  return {probe.current(mg::MemoryCategory::Activation), probe.allocated()};
}

}  // namespace

Result run_retain_graph(mg::Device device) {
  const Growth kept = run_loop({.backward = true, .retain_graph = true, .keep_loss_tensors = true}, device);
  const Growth dropped = run_loop({.backward = true, .retain_graph = true, .keep_loss_tensors = false}, device);
  const Growth plain = run_loop({.backward = true, .retain_graph = false, .keep_loss_tensors = true}, device);
  Result result;
  result.measurements = {
      bytes("retain_kept_losses_activation_bytes", "ACTIVATION after 8 iterations, retain_graph, losses kept",
            kept.activation,
            "8 x " + with_commas(kSavedPerForward) + " = " + with_commas(kIterations * kSavedPerForward)),
      bytes("retain_item_activation_bytes", "ACTIVATION after 8 iterations, retain_graph, item() kept",
            dropped.activation, "0"),
      bytes("backward_kept_losses_activation_bytes", "ACTIVATION after 8 iterations, backward(), losses kept",
            plain.activation, "0"),
      bytes("per_iteration_activation_bytes", "ACTIVATION one forward saves", kept.activation / kIterations,
            with_commas(kSavedPerForward)),
  };
  const bool grows_only_when_kept = kept.activation >= kIterations * kSavedPerForward && dropped.activation == 0;
  result.verdict = grows_only_when_kept ? Verdict::Partly : kept.activation > 0 ? Verdict::True : Verdict::False;
  result.why = "only while the loop keeps the losses: " + with_commas(kept.activation) + " B after 8 iterations (" +
               with_commas(kept.activation / kIterations) + " B each), but " + with_commas(dropped.activation) +
               " B when each loss dies at the end of its iteration; retain_graph delays the release to the "
               "last handle, it does not prevent it.";
  return result;
}

Result run_kept_losses(mg::Device device) {
  const Growth training_kept = run_loop({.backward = true, .retain_graph = false, .keep_loss_tensors = true}, device);
  const Growth training_item =
      run_loop({.backward = true, .retain_graph = false, .keep_loss_tensors = false}, device);
  const Growth evaluation_kept =
      run_loop({.backward = false, .retain_graph = false, .keep_loss_tensors = true}, device);
  const Growth evaluation_item =
      run_loop({.backward = false, .retain_graph = false, .keep_loss_tensors = false}, device);
  Result result;
  result.measurements = {
      bytes("training_kept_activation_bytes", "training, 8 losses kept: ACTIVATION held", training_kept.activation,
            "0: backward released it"),
      bytes("training_kept_allocated_bytes", "training, 8 losses kept: allocated held", training_kept.allocated,
            "8 losses x one 512-byte block = " + with_commas(kIterations * 512)),
      bytes("training_item_allocated_bytes", "training, item() kept: allocated held", training_item.allocated, "0"),
      bytes("evaluation_kept_activation_bytes", "evaluation without no_grad, 8 losses kept: ACTIVATION held",
            evaluation_kept.activation,
            "8 x " + with_commas(kSavedPerForward) + " = " + with_commas(kIterations * kSavedPerForward)),
      bytes("evaluation_kept_allocated_bytes", "evaluation without no_grad, 8 losses kept: allocated held",
            evaluation_kept.allocated),
      bytes("evaluation_item_allocated_bytes", "evaluation without no_grad, item() kept: allocated held",
            evaluation_item.allocated, "0"),
  };
  const bool leaks_only_without_backward =
      training_kept.activation == 0 && evaluation_kept.activation >= kIterations * kSavedPerForward;
  result.verdict = leaks_only_without_backward ? Verdict::Partly
                   : training_kept.activation > 0 ? Verdict::True : Verdict::False;
  result.why = "after backward a kept loss holds only its own block (" + with_commas(training_kept.allocated) +
               " B for 8), since backward released its saved tensors; without backward (evaluation outside "
               "no_grad) each kept loss holds its forward's activations: " +
               with_commas(evaluation_kept.activation) + " B for 8.";
  return result;
}

}  // namespace memory_lab
