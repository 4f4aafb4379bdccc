// cuda/device_error.cpp — the per-device error records that kernels write (see
// device_error.h): allocation on first use, and the check that turns a record into an
// mg::Error after a synchronisation.
#include "memgrad/cuda/device_error.h"

#include <array>
#include <atomic>
#include <mutex>
#include <string>

#include "memgrad/core/error.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

struct Records {
  std::mutex allocation;
  // Host and device addresses of each device's record; null until first asked for.
  std::array<std::atomic<DeviceErrorRecord*>, kMaxDevices> host{};
  std::array<DeviceErrorRecord*, kMaxDevices> device{};
};

// NOTE: never destroyed, and the records never freed: kernels may hold the address until
// the process ends, and cudaFreeHost at exit can run after the runtime has shut down.
Records& records() {
  static Records* instance = new Records();
  return *instance;
}

std::string embedding_message(const DeviceErrorRecord& record, Device device) {
  return mg::detail::str_cat(
      "embedding: index ", record.value, " is out of range for an embedding of ", record.bound, " rows (weight shape [",
      record.bound, ", ", record.detail, "]); it is at position ", record.position,
      " of the flattened indices, found by the kernel on ", device,
      " (which wrote zeros for its row) and reported at this synchronisation. Hint: every index must lie in [0, ",
      record.bound, "): check that the tokenizer's vocabulary fits the embedding, and look for negative or "
      "uninitialised ids in the batch.");
}

std::string gather_message(const DeviceErrorRecord& record, Device device) {
  return mg::detail::str_cat(
      "gather / index_select: index ", record.value, " is out of range for dimension ", record.detail, " of size ",
      record.bound, "; it is at position ", record.position, " of the flattened index, found by the kernel on ", device,
      " (which wrote a zero there) and reported at this synchronisation. Hint: every index must lie in [0, ",
      record.bound, ") (negative indices do not count from the end).");
}

}  // namespace

DeviceErrorRecord* device_error_record(Device device) {
  MG_CHECK(device.is_cuda() && device.index >= 0 && device.index < kMaxDevices,
           "device_error_record: expected a CUDA device, got ", device);
  Records& all = records();
  if (all.host[device.index].load(std::memory_order_acquire) != nullptr) return all.device[device.index];
  std::lock_guard<std::mutex> lock(all.allocation);
  if (all.host[device.index].load(std::memory_order_relaxed) == nullptr) {
    DeviceGuard guard(device);
    void* host = nullptr;
    // Portable: usable from every context; mapped: kernels write it directly.
    MG_CUDA_CHECK(cudaHostAlloc(&host, sizeof(DeviceErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable));
    *static_cast<DeviceErrorRecord*>(host) = DeviceErrorRecord{};
    void* on_device = nullptr;
    MG_CUDA_CHECK(cudaHostGetDevicePointer(&on_device, host, 0));
    all.device[device.index] = static_cast<DeviceErrorRecord*>(on_device);
    all.host[device.index].store(static_cast<DeviceErrorRecord*>(host), std::memory_order_release);
  }
  return all.device[device.index];
}

void check_device_errors(Device device) {
  if (!device.is_cuda() || device.index < 0 || device.index >= kMaxDevices) return;
  DeviceErrorRecord* record = records().host[device.index].load(std::memory_order_acquire);
  if (record == nullptr) return;  // no kernel of this device has asked for it
  const volatile DeviceErrorRecord* fields = record;
  const int32_t code = fields->code;
  // None: nothing to report; being written: a kernel still running on another stream, to
  // be reported by a later check.
  if (code == static_cast<int32_t>(DeviceErrorCode::None) || code == kDeviceErrorBeingWritten) return;
  // No kernel writes the fields while the code is set (they lose the atomicCAS), so they
  // are read whole; then the compare-exchange claims the error, so that of two host
  // threads checking at once only one reports it.
  const DeviceErrorRecord found{code, 0, fields->value, fields->bound, fields->position, fields->detail};
  int32_t expected = code;
  if (!__atomic_compare_exchange_n(&record->code, &expected, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  switch (static_cast<DeviceErrorCode>(code)) {
    case DeviceErrorCode::EmbeddingIndexOutOfRange: mg::detail::throw_error(embedding_message(found, device));
    case DeviceErrorCode::GatherIndexOutOfRange: mg::detail::throw_error(gather_message(found, device));
    case DeviceErrorCode::None: break;
  }
  MG_ASSERT(false, "unknown device error code ", code, " recorded on ", device);
}

}  // namespace mg::cuda
