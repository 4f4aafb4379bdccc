// amp/grad_scaler.h — dynamic loss scaling, as torch.amp.GradScaler: float16 gradients
// underflow to zero unless the loss is scaled up before backward; the scaler unscales them
// before the optimizer uses them, skips a step whose gradients overflowed, and adapts the
// scale (halved after an overflow, doubled after growth_interval clean steps).
//
//   mg::amp::GradScaler scaler;
//   for (...) {
//     optimizer.zero_grad();
//     mg::Tensor loss = ...;                  // under an AutocastGuard (autocast/autocast.h)
//     scaler.scale(loss).backward();
//     scaler.unscale_(optimizer);             // optional: only to see true gradients,
//     mg::optim::clip_grad_norm_(params, 1);  //   e.g. for clipping
//     scaler.step(optimizer);                 // skipped on the device after an overflow
//     scaler.update();
//   }
//
// No host synchronisation anywhere in the step: the scale, the growth tracker and each
// optimizer's found_inf flag are 0-d tensors on the loss's device, and every decision
// (skip the update? shrink or grow the scale?) is made there, by kernels: unscale_ runs one
// multi-tensor kernel per dtype (core/kernels.h's non_finite_check_and_unscale), step()
// hands found_inf to the optimizer's fused kernels (Optimizer::step_skipping_if), and
// update() runs one single-thread kernel (update_scale). Only get_scale(),
// get_growth_tracker() and state_dict() read values back, and they say so.
//
// The scale lives on the device of the first loss scaled; every gradient unscaled must be
// there too (one device per scaler).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/optim/optimizer.h"

namespace mg::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps before the scale grows
  bool enabled = true;             // false: every call passes through (scale() returns the loss)
};

// Named tensors, as a state dict holds them.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (differentiable; a 16-bit loss gives a float32 product, by memgrad's type
  // promotion, so the scaled loss itself cannot overflow). The first call places the scale
  // on the loss's device.
  Tensor scale(const Tensor& loss);
  // Divides every gradient of `optimizer`'s parameters by the scale, in place, and records
  // on the device whether any was inf or NaN. At most once per optimizer between update()s;
  // step() calls it when the caller has not.
  void unscale_(optim::Optimizer& optimizer);
  // Unscales (unless unscale_ ran) and runs optimizer.step() so that the update is skipped,
  // on the device, if an inf or NaN was found. At most once per optimizer between update()s.
  void step(optim::Optimizer& optimizer);
  // Backs off or grows the scale from the found_inf of every optimizer unscaled since the
  // last update(), on the device; then a new step may begin.
  void update();
  // Sets the scale to `new_scale` instead (the growth tracker is kept, as in PyTorch).
  void update(double new_scale);

  // The current scale, read back from the device: this waits for the queued work (a host
  // sync), so call it for logging, not every step. 1.0 when disabled.
  double get_scale() const;
  // The clean steps counted towards the next growth; a host sync too.
  int64_t get_growth_tracker() const;
  bool is_enabled() const { return options_.enabled; }

  // "scaler.scale" (0-d float32), "scaler.growth_tracker" (0-d int32) and the options
  // "scaler.growth_factor", "scaler.backoff_factor", "scaler.growth_interval" (0-d float64,
  // as optim/state_dict.h keeps hyper-parameters); empty when disabled. The scale and
  // tracker are the scaler's own device tensors once a loss was scaled.
  NamedTensors state_dict() const;
  // Restores the scale and growth tracker from `state` (entries of other names are
  // refused); the options must equal this scaler's, as with an optimizer's hyper-parameters.
  // Checks everything before it changes anything; a disabled scaler ignores `state`.
  // `source` names where the state came from in error messages.
  void load_state_dict(const NamedTensors& state, const std::string& source = "the GradScaler state dict");
  // Throws what load_state_dict(state, source) would throw, changing nothing: for a caller
  // that checks several states before it loads any (training/checkpoint.h).
  void check_state_dict(const NamedTensors& state, const std::string& source = "the GradScaler state dict") const;

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  // Where one optimizer is in the current step.
  struct OptimizerRecord {
    Stage stage = Stage::Ready;
    Tensor found_inf;  // 0-d float32 on the scale's device, written by unscale_
  };
  // The scale and tracker values a load_state_dict checked, before they are applied.
  struct LoadedState {
    double scale;
    int32_t growth_tracker;
  };

  LoadedState checked_state(const NamedTensors& state, const std::string& source) const;
  void apply(const LoadedState& loaded);
  // Throws unless a loss was scaled, naming the call that needed it.
  void check_scaled(const char* call) const;

  GradScalerOptions options_;
  Tensor scale_;           // 0-d float32, defined from the first scale()
  Tensor growth_tracker_;  // 0-d int32, beside it
  // What scale() starts from: the options' init_scale, or a loaded state's values.
  double initial_scale_;
  int32_t initial_growth_tracker_ = 0;
  // NOTE: keyed by address, as PyTorch keys by id(optimizer); cleared by every update(),
  // so an address is never reused within a step.
  std::unordered_map<const optim::Optimizer*, OptimizerRecord> records_;

  friend void load(optim::Optimizer& optimizer, GradScaler& scaler, const std::string& path);
};

// An optimizer checkpoint (optim/state_dict.h) with the scaler's state_dict() entries added,
// so that a resumed mixed-precision run continues with the same scale.
void save(const optim::Optimizer& optimizer, const GradScaler& scaler, const std::string& path,
          const std::vector<std::pair<std::string, std::string>>& metadata = {});
// Reads a file written by save() into both; a file that does not fit either changes
// neither.
void load(optim::Optimizer& optimizer, GradScaler& scaler, const std::string& path);

}  // namespace mg::amp
