// amp/autocast.h — autocast, as torch.autocast: inside an AutocastGuard, ops on tensors of
// the guard's device type run in the dtype that suits them, so a float32 model trains in
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
// The policy (which op casts to what) is applied by the ops themselves in autograd/:
//   lower precision (inputs cast to the autocast dtype): matmul, linear, conv2d,
//                                                         scaled_dot_product_attention
//   float32 (16-bit inputs cast up, result float32):     softmax, log_softmax,
//                                                         nll_loss, sum, mean, layer_norm
//   float32 result computed in float32 from the 16-bit   cross_entropy (its gradient keeps
//   inputs as they are (no float32 copy):                the logits' dtype)
//   unchanged: everything else; binary elementwise ops promote to the widest input
//   dtype anyway, and batch_norm keeps float32 statistics for 16-bit inputs.
// Only float32/float16/bfloat16 tensors are cast (float64 and integer ones never), and only
// on device types where a guard enabled autocast.
//
// backward() runs with autocast off, so each gradient takes the dtype its forward op chose;
// checkpoint recomputes under the autocast state of its forward.
//
// NOTE: autograd/ is a room below amp/, yet its ops (and the engine and checkpoint) read
// this header, as PyTorch's ops go through the Autocast dispatch key. They need only the
// inline check, the two casts and the state guard; the rest of amp/ stays out of their way.
//
// Weight-cast cache: within the outermost guard, the 16-bit copy of a float32 leaf that
// requires grad (a parameter) is kept, keyed by the tensor, its storage and version, so a
// weight used several times is cast once; its bytes are tagged AUTOCAST_CACHE in memory reports and are
// freed when the outermost guard exits. An in-place update (optimizer.step()) changes the
// version, so a stale copy is never used.
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

// Entries in this thread's weight-cast cache (for tests and curious users).
size_t autocast_cache_size();

// ---- the cast policy, applied by the ops in autograd/ ----

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

// x cast (differentiably) to the autocast dtype of its device type when it is an eligible
// float32/float16/bfloat16 tensor there; else x itself. Parameters come from the cache.
Tensor cast_to_autocast_dtype(const Tensor& x);
// x cast (differentiably) to float32 when it is a 16-bit floating tensor on a device type
// with autocast on; else x itself.
Tensor cast_to_float32(const Tensor& x);

}  // namespace mg::amp
