// core/allocator/registry.cpp — one caching allocator per device, created on first use.
//
// allocator_for() runs for every tensor that is made, so its common case is one atomic
// load: allocators sit in fixed slots per device type and index, and the mutex is taken
// only to create one or to replace a simulated one.
#include "memgrad/core/allocator/registry.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <vector>

#include "memgrad/core/allocator/host_backend.h"
#include "memgrad/core/allocator/simulated_backend.h"
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/error.h"

namespace mg {

namespace {

constexpr int kMaxDeviceIndex = 64;                                  // slots per device type
constexpr size_t kDefaultSimulatedCapacity = size_t{80} << 30;       // 80 GiB, like an H100

using AllocatorSlots = std::array<std::atomic<CachingAllocator*>, kMaxDeviceIndex>;

struct Registry {
  std::mutex mutex;  // guards creation and replacement
  std::array<AllocatorSlots, kNumDeviceTypes> slots{};
  // Simulated allocators replaced by set_simulated_capacity. Kept, never deleted, so that a
  // reference someone took earlier stays valid (see set_simulated_capacity).
  std::vector<CachingAllocator*> retired;
};

// NOTE: the registry and every allocator in it are deliberately leaked (made with new, never
// deleted). Tensors may be destroyed during static destruction, in any order relative to a
// function-static registry (a global std::vector<Tensor> constructed before the first
// allocation is destroyed after it), and they must still find their allocator to free into.
// Destroying a CUDA allocator at exit would also call cudaFree after the CUDA runtime may
// have shut down. The operating system takes the memory back when the process ends.
Registry& registry() {
  static Registry* const instance = new Registry();
  return *instance;
}

std::atomic<CachingAllocator*>& slot_for(Device device) {
  MG_CHECK(device.index >= 0 && device.index < kMaxDeviceIndex, "device ", device,
           " has no allocator: device indices must lie in [0, ", kMaxDeviceIndex, ").");
  MG_CHECK(!device.is_cpu() || device.index == 0, "device ", device,
           " does not exist: the CPU has only index 0. Hint: use Device::cpu().");
  return registry().slots[static_cast<int>(device.type)][device.index];
}

// Builds the backend for a device that has none yet. Called with the registry's mutex held.
std::unique_ptr<RawBackend> make_backend(Device device) {
  switch (device.type) {
    case DeviceType::CPU: return std::make_unique<HostBackend>();
    case DeviceType::Simulated: return std::make_unique<SimulatedBackend>(kDefaultSimulatedCapacity);
    case DeviceType::CUDA: {
#ifdef MG_WITH_CUDA
      std::unique_ptr<RawBackend> backend = cuda::make_allocator_backend(device);
      MG_ASSERT(backend != nullptr, "the CUDA allocator backend for ", device, " is missing");
      return backend;
#else
      MG_CHECK(false, "memgrad was built without CUDA support; cannot use device ", device,
               ". Hint: rebuild with -DMG_WITH_CUDA=ON or use --device cpu.");
#endif
    }
  }
  MG_ASSERT(false, "unknown device type ", static_cast<int>(device.type));
  return nullptr;
}

}  // namespace

CachingAllocator& allocator_for(Device device) {
  std::atomic<CachingAllocator*>& slot = slot_for(device);
  if (CachingAllocator* allocator = slot.load(std::memory_order_acquire)) return *allocator;

  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  if (CachingAllocator* allocator = slot.load(std::memory_order_acquire)) return *allocator;
  const CachingAllocator::Caching caching =
      device.type == DeviceType::Simulated ? CachingAllocator::Caching::On : caching_from_environment();
  auto allocator = std::make_unique<CachingAllocator>(device, make_backend(device), caching);
  slot.store(allocator.get(), std::memory_order_release);
  return *allocator.release();  // leaked on purpose: see the NOTE on registry()
}

CachingAllocator::Caching caching_from_environment() {
  const char* value = std::getenv("MG_NO_MEMORY_CACHING");
  const bool off = value != nullptr && *value != '\0' && std::string_view(value) != "0";
  return off ? CachingAllocator::Caching::Off : CachingAllocator::Caching::On;
}

void set_simulated_capacity(int index, size_t capacity_bytes, SegmentPlacement placement) {
  const Device device = Device::simulated(index);
  std::atomic<CachingAllocator*>& slot = slot_for(device);
  MG_CHECK(capacity_bytes > 0, "set_simulated_capacity(", index, ", 0): a simulated device "
           "needs a capacity above 0 bytes.");

  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  CachingAllocator* old_allocator = slot.load(std::memory_order_acquire);
  if (old_allocator != nullptr) {
    const MemoryStats old_stats = old_allocator->stats();
    MG_CHECK(old_stats.allocation_count.current == 0, "cannot change the capacity of ", device,
             ": ", old_stats.allocation_count.current, " allocations (",
             format_bytes(old_stats.allocated_bytes.current), ") are still alive on it. Hint: "
             "set the capacity before creating tensors on ", device,
             ", or destroy them first.");
  }
  auto allocator = std::make_unique<CachingAllocator>(
      device, std::make_unique<SimulatedBackend>(capacity_bytes, placement));
  if (old_allocator != nullptr) {
    // NOTE: retired rather than deleted, because callers may still hold a reference from an
    // earlier allocator_for(); with no live blocks it holds only cached segments, returned here.
    old_allocator->empty_cache();
    reg.retired.push_back(old_allocator);
  }
  slot.store(allocator.release(), std::memory_order_release);
}

}  // namespace mg
