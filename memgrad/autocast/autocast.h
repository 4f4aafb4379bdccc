// autocast/autocast.h — autocast, as torch.autocast: inside an AutocastGuard, ops on tensors
// of the guard's device type run in the dtype that suits them, so a float32 model trains in
// float16/bfloat16 where that is safe and fast, and in float32 where range or accuracy
// matters. Master weights stay float32; their 16-bit copies are cast differentiably, so
// gradients flow back to them in float32.
//
//   {
//     mg::amp::AutocastGuard autocast(mg::DType::BFloat16, mg::DeviceType::CPU);
//     mg::Tensor logits = model.forward(x);            // linear/conv: bfloat16
//     mg::Tensor loss = mg::cross_entropy(logits, y);   // float32
//   }
//   loss.backward();  // outside the region, as PyTorch recommends
//
// This header holds the thread's autocast state: the guards, the queries, and the inline
// check every op makes. Which op family casts to what is autocast/cast_policy.h; the ops of
// autograd/ apply it, casting their operands through autograd/autocast_operands.h.
//
// backward() runs with autocast off, so each gradient takes the dtype its forward op chose;
// checkpoint recomputes under the autocast state of its forward.
//
// NOTE: autocast/ is a room of its own, just below autograd/, because autograd's ops (and
// its engine and checkpoint) read this state, as PyTorch's ops go through the Autocast
// dispatch key. It needs only core/; the differentiable casts, which need autograd, live in
// autograd/autocast_operands.h, and the GradScaler, which wraps an optimizer, in amp/.
//
// Weight-cast cache (autocast/weight_cast_cache.h): within the outermost guard, the 16-bit
// copy of a float32 leaf that requires grad (a parameter) is kept, so a weight used several
// times is cast once; its bytes are tagged AUTOCAST_CACHE in memory reports and are freed
// when the outermost guard exits. A region that begins with the parameter the last one
// began with casts that region's parameters in one batch at its first miss (a forward's
// region; backward's recomputes cast as they go).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memgrad/core/device.h"
#include "memgrad/core/dtype.h"
#include "memgrad/core/tensor.h"

namespace mg::amp {

// Enables (or, with enabled = false, disables) autocast for one device type on this
// thread until the guard dies, which restores the previous state. Guards nest; the
// weight-cast cache is cleared when the outermost one exits. dtype must be float16 or
// bfloat16; device_type CPU or CUDA, or Simulated, which autocasts as the device it
// stands in for would (memory predictions, memory/simulated_target.h).
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype, DeviceType device_type = DeviceType::CUDA, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_type_;
  bool previous_enabled_;
  DType previous_dtype_;
};

// This thread's whole autocast state, to carry across a boundary: backward runs with
// autocast off (each gradient takes the dtype its forward chose, as PyTorch intends), and
// checkpoint recomputes its forward under the state that forward ran in. The default is
// autocast off everywhere, with the default dtypes.
struct AutocastState {
  uint8_t enabled_device_types = 0;  // bit t: on for DeviceType t
  std::array<DType, kNumDeviceTypes> dtypes{DType::BFloat16, DType::Float16, DType::Float16};
};
AutocastState autocast_state();

// Sets the whole state until the guard dies; nests with AutocastGuard (and counts as a
// region for the weight-cast cache).
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  AutocastState previous_;
};

bool is_autocast_enabled(DeviceType device_type);
// The dtype autocast casts to on device_type: the innermost guard's, else the default
// (float16 on CUDA, bfloat16 on CPU, as in PyTorch).
DType autocast_dtype(DeviceType device_type);

// Entries in this thread's weight-cast cache (for tests and curious users; the cache is
// autocast/weight_cast_cache.h).
size_t autocast_cache_size();

namespace detail {
// Bit t set: autocast is on for DeviceType t on this thread. One read of it is all an op
// pays when autocast is off.
extern thread_local constinit uint8_t enabled_device_types;
}  // namespace detail

// True when autocast is on for the device type of x (the op's first input).
inline bool is_autocast_on_for(const Tensor& x) {
  uint8_t enabled = detail::enabled_device_types;
  return enabled != 0 && x.defined() && (enabled >> static_cast<int>(x.device().type) & 1) != 0;
}

}  // namespace mg::amp
