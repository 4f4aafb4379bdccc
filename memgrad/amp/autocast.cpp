// amp/autocast.cpp — autocast's per-thread state, its guards, the weight-cast cache, and
// the two casts the ops in autograd/ apply (see autocast.h for the policy).
#include "memgrad/amp/autocast.h"

#include <memory>
#include <unordered_map>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/grad_mode.h"

namespace mg::amp {

namespace detail {
thread_local constinit uint8_t enabled_device_types = 0;
}  // namespace detail

namespace {

// The defaults are PyTorch's: float16 on CUDA, bfloat16 on CPU.
thread_local constinit std::array<DType, kNumDeviceTypes> autocast_dtypes = AutocastState{}.dtypes;
thread_local constinit int guard_depth = 0;

uint8_t device_type_bit(DeviceType device_type) { return static_cast<uint8_t>(1u << static_cast<int>(device_type)); }

// One parameter's 16-bit copy. The weak references tell whether the key's TensorImpl is
// still the one that was cast (an address may be reused after a tensor dies) and still
// views the same storage (set_data swaps it); the version, whether the values changed in
// place since (an optimizer step).
struct CachedCast {
  std::weak_ptr<TensorImpl> source;
  std::weak_ptr<Storage> storage;
  uint64_t version;
  // NOTE: a copy cast under no_grad has no history; it must not serve a later forward
  // that records a graph, or the gradient would never reach the master weight.
  bool has_history;
  Tensor cast;
};

thread_local std::unordered_map<const TensorImpl*, CachedCast> weight_cache;

bool is_castable(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::BFloat16;
}

// A parameter, as PyTorch's autocast cache understands one: a float32 leaf requiring grad.
bool is_cacheable(const Tensor& x) { return x.dtype() == DType::Float32 && x.is_leaf() && x.requires_grad(); }

Tensor cached_cast(const Tensor& x, DType dtype) {
  bool has_history = GradMode::is_enabled();
  auto found = weight_cache.find(x.impl());
  if (found != weight_cache.end()) {
    const CachedCast& entry = found->second;
    if (entry.source.lock() == x.impl_ptr() && entry.storage.lock() == x.storage() && entry.version == x.version() &&
        entry.has_history == has_history && entry.cast.dtype() == dtype) {
      return entry.cast;
    }
  }
  Tensor cast = to(x, dtype);
  cast.set_memory_category(MemoryCategory::AutocastCache);
  weight_cache[x.impl()] = CachedCast{x.impl_ptr(), x.storage(), x.version(), has_history, cast};
  return cast;
}

void set_enabled(DeviceType device_type, bool enabled) {
  if (enabled) {
    detail::enabled_device_types |= device_type_bit(device_type);
  } else {
    detail::enabled_device_types &= ~device_type_bit(device_type);
  }
}

// Leaving the outermost region frees the 16-bit copies: they are the region's, as in
// PyTorch (whose cache also dies with its outermost autocast).
void leave_region() {
  if (--guard_depth == 0) weight_cache.clear();
}

}  // namespace

AutocastGuard::AutocastGuard(DType dtype, DeviceType device_type, bool enabled)
    : device_type_(device_type),
      previous_enabled_(is_autocast_enabled(device_type)),
      previous_dtype_(autocast_dtypes[static_cast<int>(device_type)]) {
  MG_CHECK(dtype == DType::Float16 || dtype == DType::BFloat16, "AutocastGuard: autocast computes in a 16-bit "
           "floating dtype, float16 or bfloat16, got ", dtype, " for device type ", Device{device_type}.str(),
           ". Hint: float32 is what runs without a guard; to switch autocast off in a region, pass enabled = false.");
  autocast_dtypes[static_cast<int>(device_type)] = dtype;
  set_enabled(device_type, enabled);
  ++guard_depth;
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
  ++guard_depth;
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

size_t autocast_cache_size() { return weight_cache.size(); }

Tensor cast_to_autocast_dtype(const Tensor& x) {
  if (!is_autocast_on_for(x) || !is_castable(x.dtype())) return x;
  DType dtype = autocast_dtype(x.device().type);
  if (x.dtype() == dtype) return x;
  return is_cacheable(x) ? cached_cast(x, dtype) : to(x, dtype);
}

Tensor cast_to_float32(const Tensor& x) {
  if (!is_autocast_on_for(x) || !is_castable(x.dtype())) return x;
  return to(x, DType::Float32);
}

}  // namespace mg::amp
