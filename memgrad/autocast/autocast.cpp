// autocast/autocast.cpp — autocast's per-thread state and its guards; the outermost guard's
// exit ends the weight-cast cache's region.
#include "memgrad/autocast/autocast.h"

#include "memgrad/autocast/weight_cast_cache.h"
#include "memgrad/core/error.h"

namespace mg::amp {

namespace detail {
thread_local constinit uint8_t enabled_device_types = 0;
}  // namespace detail

namespace {

// The defaults are PyTorch's: float16 on CUDA, bfloat16 on CPU.
thread_local constinit std::array<DType, kNumDeviceTypes> autocast_dtypes = AutocastState{}.dtypes;
thread_local constinit int guard_depth = 0;

uint8_t device_type_bit(DeviceType device_type) { return static_cast<uint8_t>(1u << static_cast<int>(device_type)); }

void set_enabled(DeviceType device_type, bool enabled) {
  if (enabled) {
    detail::enabled_device_types |= device_type_bit(device_type);
  } else {
    detail::enabled_device_types &= ~device_type_bit(device_type);
  }
}

// Entering the outermost region. One that begins with autocast on (a forward) learns its
// working set and casts the last one ahead (autocast/weight_cast_cache.h). One that begins
// with it off everywhere (backward's, autograd/engine.cpp) does neither: the checkpoints it
// recomputes cast their parameters a segment at a time as backward frees memory, and
// casting them all at the first recompute would hold them through backward's peak (+16 MB
// on 1.18 GB, a checkpointed ResNet-50 step at batch 64 predicted for an H200).
void enter_region() {
  if (guard_depth++ == 0) detail::begin_weight_cast_region(/*with_working_set=*/detail::enabled_device_types != 0);
}

// Leaving the outermost region frees the 16-bit copies: they are the region's, as in
// PyTorch (whose cache also dies with its outermost autocast). Which parameters it cast is
// remembered, so that the next region like it casts them in one batch.
void leave_region() {
  if (--guard_depth == 0) detail::end_weight_cast_region();
}

}  // namespace

AutocastGuard::AutocastGuard(DType dtype, DeviceType device_type, bool enabled)
    : device_type_(device_type),
      previous_enabled_(is_autocast_enabled(device_type)),
      previous_dtype_(autocast_dtypes[static_cast<int>(device_type)]) {
  MG_CHECK(is_16_bit_float(dtype), "AutocastGuard: autocast computes in a 16-bit "
           "floating dtype, float16 or bfloat16, got ", dtype, " for device type ", Device{device_type}.str(),
           ". Hint: float32 is what runs without a guard; to switch autocast off in a region, pass enabled = false.");
  autocast_dtypes[static_cast<int>(device_type)] = dtype;
  set_enabled(device_type, enabled);
  enter_region();
}

AutocastGuard::~AutocastGuard() {
  autocast_dtypes[static_cast<int>(device_type_)] = previous_dtype_;
  set_enabled(device_type_, previous_enabled_);
  leave_region();
}

AutocastState autocast_state() { return {detail::enabled_device_types, autocast_dtypes}; }

AutocastStateGuard::AutocastStateGuard(const AutocastState& state) : previous_(autocast_state()) {
  detail::enabled_device_types = state.enabled_device_types;
  autocast_dtypes = state.dtypes;
  enter_region();
}

AutocastStateGuard::~AutocastStateGuard() {
  detail::enabled_device_types = previous_.enabled_device_types;
  autocast_dtypes = previous_.dtypes;
  leave_region();
}

bool is_autocast_enabled(DeviceType device_type) {
  return (detail::enabled_device_types & device_type_bit(device_type)) != 0;
}

DType autocast_dtype(DeviceType device_type) { return autocast_dtypes[static_cast<int>(device_type)]; }

}  // namespace mg::amp
