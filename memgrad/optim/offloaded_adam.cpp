// optim/offloaded_adam.cpp — Adam/AdamW with host state: the state at the first step, the
// gradients' trip to the host, the host update (now, or on a background thread in delayed
// mode), and the parameters' trip back.
#include "memgrad/optim/offloaded_adam.h"

#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/cpu/host_adam.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/memory/simulated_target.h"
#ifdef MG_WITH_CUDA
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/cuda/runtime.h"
#include "memgrad/cuda/transfer.h"
#endif

namespace mg::optim {

struct OffloadedAdam::HostUpdate {
  std::vector<cpu::HostAdamArrays> arrays;
  std::vector<optimizer_formulas::AdamCoefficients<float>> coefficients;
  // (parameter, host tensor of its new value) for each parameter not updated in place.
  std::vector<std::pair<Tensor, Tensor>> copies_back;
  // Holds what `arrays` point into (gradients read in place) until the update has run.
  std::vector<Tensor> operands;

  void run() const {
    for (size_t i = 0; i < arrays.size(); ++i) cpu::host_adam_update(arrays[i], coefficients[i]);
  }
};

#ifdef MG_WITH_CUDA
// One side stream per optimizer (the parameters' device: the first CUDA one seen), for the
// copies both ways, so that they overlap the caller's stream's kernels.
namespace {

// The side stream of `device`'s offloaded optimizers, made once and never destroyed, as
// PyTorch's pooled streams are: the tensors its copies used (the model's gradients, the
// pinned host buffers) may be freed after the optimizer is gone, and freeing a block
// records an event on every stream that used it (CachingAllocator::record_stream), which
// needs the stream alive. (An optimizer owning its stream crashed on an H100, 2026-12-07,
// when the model's gradients were freed after it.)
cuda::Stream& offload_stream(Device device) {
  static std::mutex mutex;
  static auto* streams = new std::map<int, cuda::Stream>();  // never destroyed, on purpose
  std::lock_guard lock(mutex);
  return streams->try_emplace(device.index, device).first->second;
}

}  // namespace

struct OffloadedAdam::Transfers {
  cuda::Stream& stream;          // offload_stream(device): shared by the device's offloaded optimizers
  cuda::Event copies_back_done;  // the last copies back: the host buffers they read are busy until then
  explicit Transfers(Device device) : stream(offload_stream(device)) {}
};
#else
struct OffloadedAdam::Transfers {};
#endif

namespace {

// The host of `param`'s device: the CPU, or in a prediction on the simulated device the
// simulated host (memory/simulated_target.h), where the state is counted and nothing computed.
Device host_of(const Tensor& param) {
  return param.device().is_simulated() ? simulated_host_of(param.device()) : Device::cpu();
}

// A host tensor shaped and laid out like `param`, pinned when `param` is on CUDA (so that
// the copies to and from it run as DMA without the host waiting).
Tensor host_like(const Tensor& param, DType dtype, MemoryCategory category) {
  return empty(param.sizes(),
               {.dtype = dtype, .device = host_of(param), .category = category, .pin_memory = param.device().is_cuda()},
               suggest_memory_format(param));
}

}  // namespace

OffloadedAdam::OffloadedAdam(bool decoupled_weight_decay, OffloadOptions offload)
    : Adam(decoupled_weight_decay), offload_(offload) {}

OffloadedAdam::OffloadedAdam(std::vector<Tensor> params, AdamOptions options, OffloadOptions offload)
    : OffloadedAdam(/*decoupled_weight_decay=*/false, offload) {
  add_param_group(std::move(params), options);
}

OffloadedAdam::OffloadedAdam(std::vector<ParamGroupOptions<AdamOptions>> groups, OffloadOptions offload)
    : OffloadedAdam(/*decoupled_weight_decay=*/false, offload) {
  MG_CHECK(!groups.empty(), "OffloadedAdam got no parameter groups. Hint: pass at least one {params, options}.");
  for (ParamGroupOptions<AdamOptions>& group : groups) add_param_group(std::move(group.params), group.options);
}

OffloadedAdam::~OffloadedAdam() {
  for (const auto& [param, id] : hooks_) param.remove_post_accumulate_grad_hook(id);
  // NOTE: the update in flight writes into state this object owns; an error it raised has
  // nowhere to go from a destructor.
  if (pending_.valid()) pending_.wait();
#ifdef MG_WITH_CUDA
  if (transfers_ != nullptr) transfers_->stream.synchronize();
#endif
}

void OffloadedAdam::add_param_group(std::vector<Tensor> params, AdamOptions options) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& param = params[i];
    MG_CHECK(!param.defined() || param.dtype() == DType::Float32 || param.dtype() == DType::Float16 ||
                 param.dtype() == DType::BFloat16,
             "OffloadedAdam: parameter ", i, " (shape ", param.sizes(), ") is ", param.dtype(),
             "; the host update takes float32, float16 or bfloat16 parameters. Hint: use optim::Adam for it.");
  }
  if (offload_.stream_gradients) {
    for (const Tensor& param : params) {
      if (!param.defined() || !param.requires_grad() || !param.is_leaf()) continue;
      hooks_.emplace_back(param, param.register_post_accumulate_grad_hook([this](const Tensor& leaf) {
        stream_gradient(leaf);
      }));
    }
  }
  Adam::add_param_group(std::move(params), options);
}

void OffloadedAdam::ensure_transfers([[maybe_unused]] const Tensor& param) {
#ifdef MG_WITH_CUDA
  if (transfers_ == nullptr && param.device().is_cuda()) transfers_ = std::make_unique<Transfers>(param.device());
#endif
}

void OffloadedAdam::stream_gradient(const Tensor& param) {
  // Delayed mode: the update in flight reads the host copies. Otherwise the CPU's
  // parameters are updated in place, and a prediction copies nothing.
  if (pending_.valid() || param.device().is_simulated()) return;
  if (param.device().is_cpu() && !offload_.delayed_update) return;
  const Tensor grad = param.grad();
  if (!grad.defined() || grad.sizes() != param.sizes() || grad.dtype() != param.dtype() ||
      !is_contiguous_in(grad, suggest_memory_format(param))) {
    return;  // step() copies (or refuses) it
  }
  ensure_transfers(param);
  copy_gradient_to_host(param, grad, host_copies_for(param));
  streamed_[param.impl()] = {.storage = grad.storage(), .offset = grad.storage_offset(), .version = grad.version()};
}

void OffloadedAdam::copy_gradient_to_host(const Tensor& param, const Tensor& grad, HostCopies& copies) {
#ifdef MG_WITH_CUDA
  if (param.device().is_cuda()) {
    const cuda::Stream current = cuda::Stream::current(param.device());
    cuda::Event produced;
    produced.record(current);  // the kernels that made (or changed) the gradient
    produced.block(transfers_->stream);
    cuda::StreamGuard on_side(transfers_->stream);
    cuda::copy_between_devices(grad, copies.grad, /*non_blocking=*/true);
    // Freeing the gradient before the copy ends (zero_grad) waits for it.
    cuda::record_stream(grad, transfers_->stream);
    return;
  }
#endif
  copies.grad.copy_(grad);
}

bool OffloadedAdam::streamed_copy_is_current(const Tensor& param, const Tensor& grad) const {
  const auto found = streamed_.find(param.impl());
  if (found == streamed_.end()) return false;
  const StreamedGradient& streamed = found->second;
  const std::shared_ptr<Storage> storage = streamed.storage.lock();
  return storage != nullptr && storage == grad.storage() && streamed.offset == grad.storage_offset() &&
         streamed.version == grad.version();
}

Optimizer::StatePlacement OffloadedAdam::state_placement(const Tensor& param) const {
  return {.device = host_of(param), .dtype = DType::Float32, .pinned = param.device().is_cuda()};
}

OffloadedAdam::HostCopies& OffloadedAdam::host_copies_for(const Tensor& param) {
  HostCopies& copies = host_copies_[param.impl()];
  if (!copies.grad.defined()) {
    copies.grad = host_like(param, param.dtype(), MemoryCategory::Gradient);
    if (param.dtype() != DType::Float32) copies.param = host_like(param, param.dtype(), MemoryCategory::Parameter);
  }
  return copies;
}

void OffloadedAdam::prepare(size_t group_index, const Tensor& param, const Tensor& grad, HostUpdate& update) {
  const AdamOptions& options = group_options(group_index);
  ParamState& state = state_for(param);
  // A prediction (the parameter on the simulated device) makes the state and the copies
  // where a run would, and computes nothing.
  const bool simulated = param.device().is_simulated();
  if (!state.step.defined()) {
    state.step = zeros({}, {.dtype = DType::Float32, .device = host_of(param), .category = MemoryCategory::OptimizerState});
    state.master_param = host_like(param, DType::Float32, MemoryCategory::OptimizerState);
    state.master_param.copy_(param);
    for (Tensor* moment : {&state.exp_avg, &state.exp_avg_sq}) {
      *moment = host_like(param, DType::Float32, MemoryCategory::OptimizerState);
      moment->zero_();
    }
    if (options.amsgrad) {
      state.max_exp_avg_sq = host_like(param, DType::Float32, MemoryCategory::OptimizerState);
      state.max_exp_avg_sq.zero_();
    }
  }
  if (simulated) {
    // As in a run: the CPU's parameters are updated in place (below), others through copies.
    if (!(host_of(param) == param.device()) || offload_.delayed_update) host_copies_for(param);
    return;
  }
  // The counter lives on the host: reading it is no sync.
  float& step_count = *state.step.data_ptr<float>();
  step_count += 1.0f;
  const AdamHyper hyper{.lr = param_groups()[group_index].lr,
                        .beta1 = options.beta1,
                        .beta2 = options.beta2,
                        .eps = options.eps,
                        .weight_decay = options.weight_decay,
                        .decoupled_weight_decay = decoupled_weight_decay(),
                        .amsgrad = options.amsgrad};
  cpu::HostAdamArrays arrays{.master_param = state.master_param.data_ptr<float>(),
                             .exp_avg = state.exp_avg.data_ptr<float>(),
                             .exp_avg_sq = state.exp_avg_sq.data_ptr<float>(),
                             .max_exp_avg_sq = options.amsgrad ? state.max_exp_avg_sq.data_ptr<float>() : nullptr,
                             .grad = nullptr,
                             .grad_dtype = param.dtype(),
                             .count = param.numel()};
  if (param.device().is_cpu() && !offload_.delayed_update) {
    // Nothing to move: the update reads the gradient and writes the parameter in place.
    arrays.grad = grad.raw_data();
    arrays.param_out = param.raw_data();
    arrays.param_out_dtype = param.dtype();
    update.operands.push_back(grad);
  } else {
    HostCopies& copies = host_copies_for(param);
    if (streamed_copy_is_current(param, grad)) {
      ++last_step_transfers_.streamed;
    } else {
      copy_gradient_to_host(param, grad, copies);
      ++last_step_transfers_.copied_at_step;
    }
    arrays.grad = copies.grad.raw_data();
    if (copies.param.defined()) {
      arrays.param_out = copies.param.raw_data();
      arrays.param_out_dtype = param.dtype();
    }
    // A float32 parameter's new value is its master itself.
    update.copies_back.emplace_back(param, copies.param.defined() ? copies.param : state.master_param);
  }
  update.arrays.push_back(arrays);
  update.coefficients.push_back(cpu::adam_coefficients<float>(hyper, step_count));
}

void OffloadedAdam::copy_back(const HostUpdate& update) {
  NoGradGuard no_grad;
#ifdef MG_WITH_CUDA
  if (transfers_ != nullptr) {
    const cuda::Stream current = cuda::Stream::current(transfers_->stream.device());
    cuda::Event caller_done;
    caller_done.record(current);  // the forward and backward that read the old values
    caller_done.block(transfers_->stream);
    {
      cuda::StreamGuard on_side(transfers_->stream);
      for (const auto& [param, source] : update.copies_back) {
        if (param.device().is_cuda()) cuda::copy_between_devices(source, param, /*non_blocking=*/true);
      }
    }
    transfers_->copies_back_done.record(transfers_->stream);
    transfers_->copies_back_done.block(current);  // the next forward reads the new values
  }
#endif
  for (const auto& [param, source] : update.copies_back) {
    if (param.device().is_cpu()) param.copy_(source);
    param.bump_version();
  }
}

void OffloadedAdam::finish_pending_update() {
  if (!pending_.valid()) return;
  const std::shared_ptr<HostUpdate> update = pending_.get();  // rethrows what the update threw
  copy_back(*update);
}

void OffloadedAdam::step() {
  finish_pending_update();
  auto update = std::make_shared<HostUpdate>();
  last_step_transfers_ = {};
  for (const ParamGroup& group : param_groups()) {
    for (const Tensor& param : group.params) {
      if (param.defined()) ensure_transfers(param);
    }
  }
  for_each_update([&](size_t group_index, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
    for (size_t i = 0; i < params.size(); ++i) prepare(group_index, params[i], grads[i], *update);
  });
  streamed_.clear();  // the next backward streams afresh
#ifdef MG_WITH_CUDA
  // One wait for every gradient copy (streamed during backward or made just now), which
  // also orders the previous copies back (same stream) before the host writes the buffers
  // they read.
  if (transfers_ != nullptr) transfers_->stream.synchronize();
#endif
  if (offload_.delayed_update) {
    pending_ = std::async(std::launch::async, [update] {
      update->run();
      return update;
    });
    return;
  }
  update->run();
  copy_back(*update);
}

OffloadedAdamW::OffloadedAdamW(std::vector<Tensor> params, AdamWOptions options, OffloadOptions offload)
    : OffloadedAdam(/*decoupled_weight_decay=*/true, offload) {
  add_param_group(std::move(params), options);
}

OffloadedAdamW::OffloadedAdamW(std::vector<ParamGroupOptions<AdamWOptions>> groups, OffloadOptions offload)
    : OffloadedAdam(/*decoupled_weight_decay=*/true, offload) {
  MG_CHECK(!groups.empty(), "OffloadedAdamW got no parameter groups. Hint: pass at least one {params, options}, e.g. ",
           "optim::weight_decay_groups(model, options).");
  for (ParamGroupOptions<AdamWOptions>& group : groups) add_param_group(std::move(group.params), group.options);
}

void OffloadedAdamW::add_param_group(std::vector<Tensor> params, AdamWOptions options) {
  OffloadedAdam::add_param_group(std::move(params), as_adam_options(options));
}

}  // namespace mg::optim
