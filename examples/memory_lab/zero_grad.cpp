// examples/memory_lab/zero_grad.cpp — experiment "zero_grad": gradient bytes between steps,
// and the peak of the next step, after zero_grad(set_to_none=true) and after
// zero_grad(set_to_none=false) (gradients filled with zeros).
//
// set_to_none frees the gradients; the next backward allocates them again, layer by layer
// as it releases the activations. So it saves their bytes between steps and through the
// next forward, and lowers the step's peak wherever that peak would have held them.
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"
#include "examples/memory_lab/models.h"
#include <memgrad/optim/sgd.h>

namespace memory_lab {
namespace {

// Two 1024-wide hidden layers (1.3 M parameters, 5.3 MB) on 64 samples; plain SGD, whose
// update keeps no state, so gradients are the only thing that differs.
constexpr int64_t kBatch = 64;
const MlpShape kShape{.inputs = 256, .hidden = {1024, 1024}, .classes = 10};

struct AfterZeroGrad {
  int64_t gradient_between_steps;  // GRADIENT bytes after zero_grad, before the next step
  int64_t step_peak_allocated;     // allocated peak of the next step: model, batch and all
};

AfterZeroGrad measure(bool set_to_none, mg::Device device) {
  MemoryProbe probe(device);  // before the model, so both settings share one reference
  auto model = make_mlp(kShape, device);
  mg::optim::SGD optimizer(model->parameters(), {.lr = 0.01});
  const mg::Tensor inputs = make_inputs(kBatch, kShape.inputs, device);
  const mg::Tensor targets = make_targets(kBatch, kShape.classes, device);
  train_step_backward(*model, inputs, targets);
  optimizer.step();

  optimizer.zero_grad(set_to_none);
  const int64_t between_steps = probe.current(mg::MemoryCategory::Gradient);
  probe.reset_peaks();
  train_step_backward(*model, inputs, targets);
  optimizer.step();
  return {between_steps, probe.peak_allocated()};
}

}  // namespace

Result run_zero_grad(mg::Device device) {
  const AfterZeroGrad to_none = measure(true, device);
  const AfterZeroGrad to_zeros = measure(false, device);
  const int64_t gradient_bytes = parameter_bytes(*make_mlp(kShape, device));
  Result result;
  result.measurements = {
      bytes("gradient_between_steps_none_bytes", "GRADIENT between steps, set_to_none=true",
            to_none.gradient_between_steps, "0"),
      bytes("gradient_between_steps_zeros_bytes", "GRADIENT between steps, set_to_none=false",
            to_zeros.gradient_between_steps, "the parameters' bytes, " + with_commas(gradient_bytes)),
      bytes("step_peak_none_bytes", "allocated peak of the next step (all held), set_to_none=true",
            to_none.step_peak_allocated),
      bytes("step_peak_zeros_bytes", "allocated peak of the next step (all held), set_to_none=false",
            to_zeros.step_peak_allocated),
  };
  const bool saves_between_steps = to_none.gradient_between_steps == 0 && to_zeros.gradient_between_steps > 0;
  const bool saves_at_peak = to_none.step_peak_allocated < to_zeros.step_peak_allocated;
  result.verdict = !saves_between_steps ? Verdict::False : saves_at_peak ? Verdict::True : Verdict::Partly;
  result.why = "between steps it holds " + with_commas(to_none.gradient_between_steps) + " B of gradients instead of " +
               with_commas(to_zeros.gradient_between_steps) + " B, and the next step's allocated peak was " +
               with_commas(to_none.step_peak_allocated) + " B instead of " +
               with_commas(to_zeros.step_peak_allocated) + " B: set to none, the gradients are created during "
               "backward as the activations are released, instead of being held through it.";
  return result;
}

}  // namespace memory_lab
