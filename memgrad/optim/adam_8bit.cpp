// optim/adam_8bit.cpp — Adam8bit and AdamW8bit: option checks, lazy 8-bit state, and the
// step that sends large parameters to adam_8bit_step and small ones to adam_step.
#include "memgrad/optim/adam_8bit.h"

#include <utility>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"

namespace mg::optim {

namespace {

// uint8 codes for `param`'s moment in `map`, dense in its layout, all the code of 0.
Tensor new_codes(const Tensor& param, const quantize_8bit::QuantizationMap& map) {
  Tensor codes = empty(param.sizes(),
                       {.dtype = DType::UInt8, .device = param.device(), .category = MemoryCategory::OptimizerState},
                       suggest_memory_format(param));
  codes.fill_(quantize_8bit::zero_code(map));
  return codes;
}

// One float32 absmax per block, all 0 (every code then dequantises to 0).
Tensor new_absmax(const Tensor& param, int64_t block_size) {
  return zeros({quantize_8bit::block_count(param.numel(), block_size)},
               {.dtype = DType::Float32, .device = param.device(), .category = MemoryCategory::OptimizerState});
}

}  // namespace

Adam8bit::Adam8bit(std::vector<Tensor> params, Adam8bitOptions options) {
  add_param_group(std::move(params), options);
}

Adam8bit::Adam8bit(std::vector<ParamGroupOptions<Adam8bitOptions>> groups) {
  MG_CHECK(!groups.empty(), "Adam8bit got no parameter groups. Hint: pass at least one {params, options}.");
  for (ParamGroupOptions<Adam8bitOptions>& group : groups) add_param_group(std::move(group.params), group.options);
}

void Adam8bit::add_param_group(std::vector<Tensor> params, Adam8bitOptions options) {
  check_adam_hyper(options.eps, options.beta1, options.beta2, options.weight_decay);
  MG_CHECK(options.block_size >= quantize_8bit::kMinBlockSize && options.block_size <= quantize_8bit::kMaxBlockSize,
           "Invalid block_size: ", options.block_size, " (must be in [", quantize_8bit::kMinBlockSize, ", ",
           quantize_8bit::kMaxBlockSize, "]; the default ", quantize_8bit::kDefaultBlockSize, " is the paper's)");
  check_non_negative(static_cast<double>(options.min_8bit_size), "min_8bit_size");
  add_group(std::move(params), options.lr);
  options_.push_back(options);
}

void Adam8bit::step() {
  for_each_update([&](size_t group_index, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
    const Adam8bitOptions& options = options_[group_index];
    // Two lists: parameters with 8-bit moments, and small ones with AdamW's.
    std::vector<Tensor> params_8bit, grads_8bit, exp_avg_codes, exp_avg_sq_codes, exp_avg_absmaxes,
        exp_avg_sq_absmaxes, steps_8bit;
    std::vector<Tensor> params_32bit, grads_32bit, exp_avgs, exp_avg_sqs, steps_32bit;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& param = params[i];
      ParamState& state = state_for(param);
      const bool quantized = param.numel() >= options.min_8bit_size;
      if (!state.step.defined()) {
        state.step = new_step_counter(param);
        if (quantized) {
          state.exp_avg = new_codes(param, quantize_8bit::kSignedMap);
          state.exp_avg_sq = new_codes(param, quantize_8bit::kUnsignedMap);
          state.exp_avg_absmax = new_absmax(param, options.block_size);
          state.exp_avg_sq_absmax = new_absmax(param, options.block_size);
        } else {
          state.exp_avg = new_state(param, 0);
          state.exp_avg_sq = new_state(param, 0);
        }
      }
      if (quantized) {
        params_8bit.push_back(param);
        grads_8bit.push_back(grads[i]);
        exp_avg_codes.push_back(state.exp_avg);
        exp_avg_sq_codes.push_back(state.exp_avg_sq);
        exp_avg_absmaxes.push_back(state.exp_avg_absmax);
        exp_avg_sq_absmaxes.push_back(state.exp_avg_sq_absmax);
        steps_8bit.push_back(state.step);
      } else {
        params_32bit.push_back(param);
        grads_32bit.push_back(grads[i]);
        exp_avgs.push_back(state.exp_avg);
        exp_avg_sqs.push_back(state.exp_avg_sq);
        steps_32bit.push_back(state.step);
      }
    }
    AdamHyper hyper{.lr = param_groups()[group_index].lr,
                    .beta1 = options.beta1,
                    .beta2 = options.beta2,
                    .eps = options.eps,
                    .weight_decay = options.weight_decay,
                    .decoupled_weight_decay = decoupled_weight_decay_,
                    .amsgrad = false,
                    .found_inf = found_inf()};
    const Tensor rate_on_device = lr_on_device(group_index, params[0].device());
    if (rate_on_device.defined()) hyper.lr_on_device = &rate_on_device;
    const KernelTable& device_kernels = kernels(params[0].device());
    if (!params_8bit.empty()) {
      device_kernels.adam_8bit_step(params_8bit, grads_8bit, exp_avg_codes, exp_avg_sq_codes, exp_avg_absmaxes,
                                    exp_avg_sq_absmaxes, steps_8bit, hyper, options.block_size);
    }
    if (!params_32bit.empty()) {
      device_kernels.adam_step(params_32bit, grads_32bit, exp_avgs, exp_avg_sqs, {}, steps_32bit, hyper);
    }
  });
}

std::vector<std::pair<std::string, double>> Adam8bit::hyper_parameters(size_t group_index) const {
  const Adam8bitOptions& options = options_.at(group_index);
  return {{"beta1", options.beta1},
          {"beta2", options.beta2},
          {"eps", options.eps},
          {"weight_decay", options.weight_decay},
          {"block_size", static_cast<double>(options.block_size)},
          {"min_8bit_size", static_cast<double>(options.min_8bit_size)}};
}

int64_t Adam8bit::quantization_blocks(size_t param_index) const {
  size_t first_index = 0;
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const std::vector<Tensor>& params = param_groups()[g].params;
    if (param_index < first_index + params.size()) {
      const int64_t numel = params[param_index - first_index].numel();
      const Adam8bitOptions& options = options_.at(g);
      return numel >= options.min_8bit_size ? quantize_8bit::block_count(numel, options.block_size) : 0;
    }
    first_index += params.size();
  }
  MG_ASSERT(false, "quantization_blocks: parameter ", param_index, " of ", first_index);
}

AdamW8bit::AdamW8bit(std::vector<Tensor> params, AdamW8bitOptions options) : Adam8bit(/*decoupled_weight_decay=*/true) {
  add_param_group(std::move(params), options);
}

AdamW8bit::AdamW8bit(std::vector<ParamGroupOptions<AdamW8bitOptions>> groups)
    : Adam8bit(/*decoupled_weight_decay=*/true) {
  MG_CHECK(!groups.empty(), "AdamW8bit got no parameter groups. Hint: pass at least one {params, options}, e.g. ",
           "optim::weight_decay_groups(model, options).");
  for (ParamGroupOptions<AdamW8bitOptions>& group : groups) add_param_group(std::move(group.params), group.options);
}

void AdamW8bit::add_param_group(std::vector<Tensor> params, AdamW8bitOptions options) {
  // The two option types differ only in a default, so the fields carry over one by one.
  Adam8bit::add_param_group(std::move(params), {.lr = options.lr,
                                                .beta1 = options.beta1,
                                                .beta2 = options.beta2,
                                                .eps = options.eps,
                                                .weight_decay = options.weight_decay,
                                                .block_size = options.block_size,
                                                .min_8bit_size = options.min_8bit_size});
}

}  // namespace mg::optim
