// examples/memory_lab/optimizer_state.cpp — experiment "optimizer_state": the
// OPTIMIZER_STATE bytes of SGD, SGD with momentum, Adam and Adagrad after one step, beside
// the parameters' bytes.
//
// State is created lazily at a parameter's first step: a momentum buffer (SGD with
// momentum), two moments (Adam), a running sum of squares (Adagrad), each the parameter's
// size, and for Adam and Adagrad a 4-byte float32 step counter per parameter tensor.
#include <functional>
#include <memory>

#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"
#include "examples/memory_lab/models.h"
#include <memgrad/optim/adagrad.h>
#include <memgrad/optim/adam.h>
#include <memgrad/optim/sgd.h>

namespace memory_lab {
namespace {

// Two 1024-wide hidden layers: 1,323,018 parameters in 6 tensors (3 weights, 3 biases).
constexpr int64_t kBatch = 64;
const MlpShape kShape{.inputs = 256, .hidden = {1024, 1024}, .classes = 10};

using MakeOptimizer = std::function<std::unique_ptr<mg::optim::Optimizer>(std::vector<mg::Tensor>)>;

// OPTIMIZER_STATE bytes after the first step of the optimizer `make` builds.
int64_t state_after_one_step(mg::nn::Module& model, const mg::Tensor& inputs, const mg::Tensor& targets,
                             const MakeOptimizer& make, mg::Device device) {
  MemoryProbe probe(device);
  const std::unique_ptr<mg::optim::Optimizer> optimizer = make(model.parameters());
  train_step_backward(model, inputs, targets);
  optimizer->step();
  optimizer->zero_grad();
  return probe.current(mg::MemoryCategory::OptimizerState);
}

}  // namespace

Result run_optimizer_state(mg::Device device) {
  using namespace mg::optim;
  auto model = make_mlp(kShape, device);
  const mg::Tensor inputs = make_inputs(kBatch, kShape.inputs, device);
  const mg::Tensor targets = make_targets(kBatch, kShape.classes, device);
  const int64_t parameters = parameter_bytes(*model);
  const int64_t counters = static_cast<int64_t>(model->parameters().size()) * 4;

  const int64_t sgd = state_after_one_step(*model, inputs, targets, [](auto params) {
    return std::make_unique<SGD>(std::move(params), SGDOptions{.lr = 0.01});
  }, device);
  const int64_t momentum = state_after_one_step(*model, inputs, targets, [](auto params) {
    return std::make_unique<SGD>(std::move(params), SGDOptions{.lr = 0.01, .momentum = 0.9});
  }, device);
  const int64_t adam = state_after_one_step(*model, inputs, targets, [](auto params) {
    return std::make_unique<Adam>(std::move(params), AdamOptions{});
  }, device);
  const int64_t adagrad = state_after_one_step(*model, inputs, targets, [](auto params) {
    return std::make_unique<Adagrad>(std::move(params), AdagradOptions{});
  }, device);

  const auto times_parameters = [&](int64_t state) { return static_cast<double>(state) / parameters; };
  Result result;
  result.measurements = {
      bytes("parameter_bytes", "PARAMETER (the model)", parameters, with_commas(model->num_parameters()) + " x 4 B"),
      bytes("sgd_state_bytes", "OPTIMIZER_STATE, SGD", sgd, "0"),
      bytes("momentum_state_bytes", "OPTIMIZER_STATE, SGD momentum 0.9", momentum, "1x parameters"),
      bytes("adam_state_bytes", "OPTIMIZER_STATE, Adam", adam,
            "2x parameters + 6 counters x 4 B = " + with_commas(2 * parameters + counters)),
      bytes("adagrad_state_bytes", "OPTIMIZER_STATE, Adagrad", adagrad,
            "1x parameters + 6 counters x 4 B = " + with_commas(parameters + counters)),
      ratio("momentum_state_ratio", "SGD momentum state / parameters", times_parameters(momentum)),
      ratio("adam_state_ratio", "Adam state / parameters", times_parameters(adam)),
      ratio("adagrad_state_ratio", "Adagrad state / parameters", times_parameters(adagrad)),
  };
  const bool as_stated = sgd == 0 && momentum == parameters && adam == 2 * parameters + counters &&
                         adagrad == parameters + counters;
  result.verdict = as_stated ? Verdict::True : Verdict::False;
  result.why = "SGD kept " + with_commas(sgd) + " B, momentum " + with_commas(momentum) + " B (1x), Adam " +
               with_commas(adam) + " B (2x + " + with_commas(counters) + " B of step counters), Adagrad " +
               with_commas(adagrad) + " B (1x + counters), for " + with_commas(parameters) + " B of parameters.";
  return result;
}

}  // namespace memory_lab
