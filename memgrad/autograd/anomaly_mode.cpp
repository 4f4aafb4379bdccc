// autograd/anomaly_mode.cpp — the switch, what a node remembers of its forward, and the
// check of each node's gradients with the message that names where they went bad.
#include "memgrad/autograd/anomaly_mode.h"

#include <cmath>
#include <limits>
#include <string>
#include <string_view>

#include "memgrad/autograd/node.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/memory/context.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/memory/recorder.h"

namespace mg::autograd {

namespace detail {
std::atomic<bool> anomaly_enabled{false};
}

void set_anomaly_enabled(bool enabled) {
  if (detail::anomaly_enabled.exchange(enabled) == enabled) return;
  // The module path is kept only while someone reads it: anomaly mode does, while on.
  memory::detail::context_readers.fetch_add(enabled ? 1 : -1, std::memory_order_relaxed);
}

ForwardOrigin current_forward_origin() {
  const memory::detail::Context& context = memory::detail::current_context();
  return {.enclosing_op = context.op, .module = context.module, .step = memory::detail::recording_step()};
}

namespace {

// Slots of total_norm_power's partials, as clip_grad_norm_ takes: on a GPU about one wave of
// blocks, each reducing its share of the gradient.
constexpr int64_t kPartials = 1024;

// The largest |x| of `grad` (NaN when any element is NaN), read by the host.
double largest_magnitude(const Tensor& grad) {
  // The kernel reads a dense tensor as one flat array; a view (an expanded gradient) is copied.
  const Tensor dense = is_contiguous_in(grad, suggest_memory_format(grad)) ? grad : contiguous_copy(grad);
  const TensorOptions options{.dtype = grad.dtype() == DType::Float64 ? DType::Float64 : DType::Float32,
                              .device = grad.device()};
  TensorOptions workspace = options;
  workspace.category = MemoryCategory::Workspace;
  const Tensor partials = empty({kPartials}, workspace);
  const Tensor result = empty({}, options);
  kernels(grad.device()).total_norm_power({&dense, 1}, std::numeric_limits<double>::infinity(), partials, result);
  return result.item<double>();
}

// "Log" for "LogBackward": the node's name without the suffix, as the memory Recorder names
// forward allocations.
std::string_view forward_op_name(std::string_view node_name) {
  constexpr std::string_view suffix = "Backward";
  if (node_name.size() > suffix.size() && node_name.ends_with(suffix)) node_name.remove_suffix(suffix.size());
  return node_name;
}

std::string where_recorded(const Node& node) {
  const ForwardOrigin* origin = node.forward_origin();
  if (origin == nullptr) {
    return "The node was recorded while anomaly mode was off, so its forward op and module are unknown: turn "
           "DetectAnomalyGuard on before the forward pass to have them named.";
  }
  std::string text = "It was recorded in forward by the op " + std::string(forward_op_name(node.name()));
  if (origin->enclosing_op != 0) text += " inside " + memory::detail::label_text(origin->enclosing_op);
  text += origin->module != 0 ? " in module " + memory::detail::label_text(origin->module)
                              : " outside any nn::Module";
  if (origin->step) text += ", at step " + std::to_string(*origin->step) + " of the running memory::Recorder";
  return text + ".";
}

const char* hint(bool is_nan) {
  if (is_nan) {
    return "Hint: a NaN gradient comes from 0 * Inf or Inf - Inf in this backward, or from a NaN in the values the "
           "node saved in forward (log or sqrt of a negative number, 0 / 0 upstream): print the forward op's inputs "
           "and output.";
  }
  return "Hint: an Inf gradient comes from an op taken where its derivative is infinite (log or sqrt at 0, a division "
         "by 0) or from a value too large for the gradient's dtype (float16 ends at 65504: scale the loss down, or "
         "compute this op in float32): clamp the op's input away from the pole, or add an epsilon.";
}

}  // namespace

void check_gradients(const Node& node, const std::vector<Tensor>& grad_inputs) {
  for (size_t index = 0; index < grad_inputs.size(); ++index) {
    const Tensor& grad = grad_inputs[index];
    // The simulated device holds no values to check.
    if (!grad.defined() || grad.numel() == 0 || !is_floating(grad.dtype()) || grad.device().is_simulated()) continue;
    const double magnitude = largest_magnitude(grad);
    if (std::isfinite(magnitude)) continue;
    const bool is_nan = std::isnan(magnitude);
    throw Error(mg::detail::str_cat("anomaly detected: ", node.name(), " returned a gradient with ",
                                    is_nan ? "NaN" : "Inf", " values for input ", index, " of its forward op (shape ",
                                    grad.sizes(), ", ", grad.dtype(), ", ", grad.device(), "). ", where_recorded(node),
                                    " ", hint(is_nan)));
  }
}

}  // namespace mg::autograd
