// amp/grad_scaler.cpp — GradScaler: the scale and its bookkeeping on the host, every value
// and decision on the device (see grad_scaler.h), and its entries in optimizer checkpoints.
#include "memgrad/amp/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/optim/state_dict.h"

namespace mg::amp {
namespace {

constexpr const char* kPrefix = "scaler.";  // of every state-dict entry

// The scaler's tensors hold optimizer-like state: their bytes show up under that category.
TensorOptions state_options(DType dtype, Device device) {
  return {.dtype = dtype, .device = device, .category = MemoryCategory::OptimizerState};
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options), initial_scale_(options.init_scale) {
  MG_CHECK(std::isfinite(options.init_scale) && options.init_scale > 0, "GradScaler: init_scale must be a ",
           "positive finite number, got ", options.init_scale);
  MG_CHECK(options.growth_factor > 1.0, "GradScaler: the growth factor must be > 1.0, got ",
           options.growth_factor);
  MG_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1.0,
           "GradScaler: the backoff factor must be in (0, 1), got ", options.backoff_factor);
  MG_CHECK(options.growth_interval > 0 && options.growth_interval <= INT32_MAX,
           "GradScaler: growth_interval must be a positive int32, got ", options.growth_interval);
}

void GradScaler::check_scaled(const char* call) const {
  MG_CHECK(scale_.defined(), "GradScaler.", call, " was called before any scale(loss), so there is no ",
           "scale yet. Hint: call scaler.scale(loss).backward() earlier in the iteration.");
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!options_.enabled) return loss;
  MG_CHECK(loss.defined() && is_floating(loss.dtype()), "GradScaler.scale(): expected a floating-point ",
           "tensor, got ", loss.defined() ? dtype_name(loss.dtype()) : "an undefined tensor");
  if (!scale_.defined()) {
    scale_ = full({}, initial_scale_, state_options(DType::Float32, loss.device()));
    growth_tracker_ = full({}, initial_growth_tracker_, state_options(DType::Int32, loss.device()));
  }
  MG_CHECK(loss.device() == scale_.device(), "GradScaler.scale(): the loss is on ", loss.device(),
           " but this scaler's scale lives on ", scale_.device(), " (the device of the first loss it ",
           "scaled). Hint: use one GradScaler per device.");
  return mul(loss, scale_);
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  check_scaled("unscale_()");
  OptimizerRecord& record = records_[&optimizer];
  MG_CHECK(record.stage != Stage::Unscaled, "unscale_() has already been called on this optimizer since ",
           "the last update(). Hint: call scaler.update() once per iteration, after scaler.step().");
  MG_CHECK(record.stage != Stage::Stepped, "unscale_() is being called after step() on this optimizer ",
           "since the last update(). Hint: unscale_() goes before step(), which unscales by itself.");
  NoGradGuard no_grad;
  const Device device = scale_.device();

  // The gradients by dtype, one multi-tensor kernel call each; all checked before any runs.
  std::vector<std::vector<Tensor>> lists;
  const std::vector<Tensor> params = optimizer.all_params();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = params[i].grad();
    if (!grad.defined()) continue;
    MG_CHECK(grad.device() == device, "GradScaler.unscale_(): the gradient of parameter ", i, " (shape ",
             grad.sizes(), ") is on ", grad.device(), " but the scale lives on ", device,
             ". Hint: a GradScaler serves one device; scale the loss computed there.");
    // The kernel walks a gradient as a flat array: a non-dense one (a view set as .grad) is
    // replaced by a dense copy, which the optimizer's step would have made anyway.
    const MemoryFormat format = suggest_memory_format(grad);
    if (!is_contiguous_in(grad, format)) {
      grad = contiguous_copy(grad, format);
      grad.set_memory_category(MemoryCategory::Gradient);
      params[i].set_grad(grad);
    }
    auto same_dtype = [&](const std::vector<Tensor>& list) { return list[0].dtype() == grad.dtype(); };
    auto list = std::find_if(lists.begin(), lists.end(), same_dtype);
    if (list == lists.end()) list = lists.emplace(lists.end());
    list->push_back(grad);
  }

  record.found_inf = zeros({}, state_options(DType::Float32, device));
  // NOTE: 1 / scale on the device (exact for the powers of two the scale usually is).
  const Tensor inv_scale = rdiv(1.0, scale_);
  for (const std::vector<Tensor>& grads : lists) {
    kernels(device).non_finite_check_and_unscale(grads, record.found_inf, inv_scale);
    for (const Tensor& grad : grads) grad.bump_version();
  }
  record.stage = Stage::Unscaled;
}

void GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return;
  }
  check_scaled("step()");
  OptimizerRecord& record = records_[&optimizer];
  MG_CHECK(record.stage != Stage::Stepped, "step() has already been called on this optimizer since the last ",
           "update(). Hint: call scaler.update() once per iteration, after scaler.step().");
  if (record.stage == Stage::Ready) unscale_(optimizer);  // keeps `record` valid: no insertion
  optimizer.step_skipping_if(record.found_inf);
  record.stage = Stage::Stepped;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  check_scaled("update()");
  NoGradGuard no_grad;
  // Any optimizer's overflow backs the scale off: the flags are summed, on the device.
  Tensor found_inf;
  for (const auto& [optimizer, record] : records_) {
    if (!record.found_inf.defined()) continue;
    found_inf = found_inf.defined() ? add(found_inf, record.found_inf) : record.found_inf;
  }
  MG_CHECK(found_inf.defined(), "GradScaler.update(): no inf checks were recorded since the last update(). ",
           "Hint: call scaler.step(optimizer) (or scaler.unscale_(optimizer)) before scaler.update().");
  kernels(scale_.device())
      .update_scale(scale_, growth_tracker_, found_inf, options_.growth_factor, options_.backoff_factor,
                    options_.growth_interval);
  records_.clear();
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  check_scaled("update(new_scale)");
  MG_CHECK(std::isfinite(new_scale) && new_scale > 0, "GradScaler.update(new_scale): the new scale must be a ",
           "positive finite number, got ", new_scale);
  scale_.fill_(new_scale);
  records_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<float>() : initial_scale_;
}

int64_t GradScaler::get_growth_tracker() const {
  if (!options_.enabled) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int32_t>() : initial_growth_tracker_;
}

NamedTensors GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  const Tensor scale = scale_.defined() ? scale_ : scalar_tensor(initial_scale_, {.dtype = DType::Float32});
  const Tensor growth_tracker =
      growth_tracker_.defined() ? growth_tracker_ : scalar_tensor(initial_growth_tracker_, {.dtype = DType::Int32});
  auto option = [](double value) { return scalar_tensor(value, {.dtype = DType::Float64}); };
  return {{"scaler.scale", scale},
          {"scaler.growth_tracker", growth_tracker},
          {"scaler.growth_factor", option(options_.growth_factor)},
          {"scaler.backoff_factor", option(options_.backoff_factor)},
          {"scaler.growth_interval", option(static_cast<double>(options_.growth_interval))}};
}

GradScaler::LoadedState GradScaler::checked_state(const NamedTensors& state, const std::string& source) const {
  std::map<std::string, Tensor> entries;
  for (const auto& [key, tensor] : state) {
    MG_CHECK(key.starts_with(kPrefix), source, ": unexpected entry \"", key, "\"; a GradScaler's state holds ",
             "scaler.<name> entries only.");
    entries[key.substr(std::char_traits<char>::length(kPrefix))] = tensor;
  }
  auto take = [&](const std::string& name, DType dtype) {
    auto found = entries.find(name);
    MG_CHECK(found != entries.end(), source, ": \"", kPrefix, name, "\" is missing. Hint: a checkpoint ",
             "without a GradScaler's state (written by optim::save) loads with optim::load.");
    const Tensor tensor = found->second;
    entries.erase(found);
    MG_CHECK(tensor.dim() == 0 && tensor.dtype() == dtype, source, ": \"", kPrefix, name, "\" should be a 0-d ",
             dtype, " tensor but is ", tensor.sizes(), " ", tensor.dtype(), ".");
    return tensor;
  };
  const double scale = take("scale", DType::Float32).item<float>();
  const int32_t growth_tracker = take("growth_tracker", DType::Int32).item<int32_t>();
  MG_CHECK(std::isfinite(scale) && scale > 0, source, ": the saved scale is ", scale,
           "; a scale must be positive and finite.");
  MG_CHECK(growth_tracker >= 0 && growth_tracker < options_.growth_interval, source, ": the saved growth ",
           "tracker is ", growth_tracker, "; it must be in [0, growth_interval = ", options_.growth_interval, ").");
  const std::pair<const char*, double> options[] = {{"growth_factor", options_.growth_factor},
                                                    {"backoff_factor", options_.backoff_factor},
                                                    {"growth_interval", static_cast<double>(options_.growth_interval)}};
  for (const auto& [name, value] : options) {
    const double saved = take(name, DType::Float64).item<double>();
    MG_CHECK(saved == value, source, ": the GradScaler was saved with ", name, " = ", saved, " but this one has ",
             name, " = ", value, ". Hint: build the GradScaler with the options it was trained with.");
  }
  MG_CHECK(entries.empty(), source, ": \"", kPrefix, entries.begin()->first, "\" is not part of a GradScaler's ",
           "state.");
  return {scale, growth_tracker};
}

void GradScaler::apply(const LoadedState& loaded) {
  if (scale_.defined()) {
    scale_.fill_(loaded.scale);
    growth_tracker_.fill_(loaded.growth_tracker);
  } else {
    initial_scale_ = loaded.scale;
    initial_growth_tracker_ = loaded.growth_tracker;
  }
}

void GradScaler::load_state_dict(const NamedTensors& state, const std::string& source) {
  if (!options_.enabled) return;
  apply(checked_state(state, source));
}

void GradScaler::check_state_dict(const NamedTensors& state, const std::string& source) const {
  if (options_.enabled) checked_state(state, source);
}

void save(const optim::Optimizer& optimizer, const GradScaler& scaler, const std::string& path,
          const std::vector<std::pair<std::string, std::string>>& metadata) {
  optim::OptimizerStateDict state = optim::state_dict(optimizer);
  for (auto& entry : scaler.state_dict()) state.tensors.push_back(std::move(entry));
  optim::save(state, path, metadata);
}

void load(optim::Optimizer& optimizer, GradScaler& scaler, const std::string& path) {
  const std::string source = optim::checkpoint_source(path);
  optim::OptimizerStateDict state = optim::read_state_dict(path);
  NamedTensors scaler_state;
  std::erase_if(state.tensors, [&](const std::pair<std::string, Tensor>& entry) {
    if (!entry.first.starts_with(kPrefix)) return false;
    scaler_state.push_back(entry);
    return true;
  });
  // Both halves are checked before either changes.
  if (!scaler.is_enabled()) {
    optim::load_state_dict(optimizer, state, source);
    return;
  }
  const GradScaler::LoadedState loaded = scaler.checked_state(scaler_state, source);
  optim::load_state_dict(optimizer, state, source);
  scaler.apply(loaded);
}

}  // namespace mg::amp
