// examples/memory_lab/no_grad.cpp — experiment "no_grad": does evaluating under NoGradGuard
// save the activation memory, and does model.eval() alone?
//
// A forward records, for each op, what its backward needs (here each ReLU's output); under
// NoGradGuard nothing is recorded. eval() is a different switch: it changes how dropout and
// batch norm compute, not whether anything is saved.
#include <memgrad/autograd/grad_mode.h>
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"
#include "examples/memory_lab/models.h"

namespace memory_lab {
namespace {

// An evaluation batch through four hidden layers: each ReLU output, 256 x 1024 floats
// (1 MiB), is what a recorded forward keeps.
constexpr int64_t kBatch = 256;
const MlpShape kShape{.inputs = 512, .hidden = {1024, 1024, 1024, 1024}, .classes = 10};

struct ForwardPeaks {
  int64_t activation;
  int64_t allocated;
};

// The peaks of one forward, the logits dropped before measuring (as an evaluation loop
// keeps only the metrics).
ForwardPeaks forward_peaks(mg::nn::Module& model, const mg::Tensor& inputs, mg::Device device) {
  MemoryProbe probe(device);
  model(inputs);
  return {probe.peak(mg::MemoryCategory::Activation), probe.peak_allocated()};
}

}  // namespace

Result run_no_grad(mg::Device device) {
  auto model = make_mlp(kShape, device);
  const mg::Tensor inputs = make_inputs(kBatch, kShape.inputs, device);

  const ForwardPeaks recorded = forward_peaks(*model, inputs, device);
  model->eval();
  const ForwardPeaks eval_only = forward_peaks(*model, inputs, device);
  ForwardPeaks eval_no_grad;
  {
    mg::NoGradGuard no_grad;
    eval_no_grad = forward_peaks(*model, inputs, device);
  }

  const int64_t relu_outputs = static_cast<int64_t>(kShape.hidden.size()) * kBatch * kShape.hidden[0] * 4;
  Result result;
  result.measurements = {
      bytes("activation_peak_with_grad_bytes", "ACTIVATION peak, forward with grad mode on", recorded.activation,
            "4 ReLU outputs x 256x1024 x 4 B = " + with_commas(relu_outputs)),
      bytes("activation_peak_eval_bytes", "ACTIVATION peak, model.eval(), grad mode on", eval_only.activation),
      bytes("activation_peak_no_grad_bytes", "ACTIVATION peak, eval() under NoGradGuard", eval_no_grad.activation,
            "0"),
      bytes("allocated_peak_with_grad_bytes", "allocated peak, forward with grad mode on", recorded.allocated),
      bytes("allocated_peak_no_grad_bytes", "allocated peak, under NoGradGuard", eval_no_grad.allocated),
  };
  const bool no_grad_saves = eval_no_grad.activation == 0 && recorded.activation > 0;
  result.verdict = no_grad_saves ? Verdict::True : Verdict::False;
  result.why = "under NoGradGuard the forward saved " + with_commas(eval_no_grad.activation) + " B for backward (" +
               with_commas(recorded.activation) + " B with grad mode on) and its allocated peak fell from " +
               with_commas(recorded.allocated) + " to " + with_commas(eval_no_grad.allocated) +
               " B; eval() alone saved " + with_commas(eval_only.activation) + " B all the same.";
  return result;
}

}  // namespace memory_lab
