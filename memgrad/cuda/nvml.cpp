// cuda/nvml.cpp — NVML loaded at run time (see the header).
#include "memgrad/cuda/nvml.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include "memgrad/core/allocator/caching_allocator.h"

namespace mg::cuda {

namespace {

// The part of NVML's C interface memgrad calls, as nvml.h declares it: every function
// returns nvmlReturn_t (0 is NVML_SUCCESS), a device is an opaque handle, and nvmlMemory_t
// is {total, free, used} in bytes.
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemoryInfo {
  unsigned long long total, free, used;
};

// The library, loaded and initialised once per process on first use.
class NvmlLibrary {
 public:
  NvmlLibrary() {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return;
    init_ = reinterpret_cast<NvmlReturn (*)()>(dlsym(library, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<NvmlReturn (*)()>(dlsym(library, "nvmlShutdown"));
    handle_by_bus_id_ = reinterpret_cast<NvmlReturn (*)(const char*, NvmlDevice*)>(
        dlsym(library, "nvmlDeviceGetHandleByPciBusId_v2"));
    memory_info_ =
        reinterpret_cast<NvmlReturn (*)(NvmlDevice, NvmlMemoryInfo*)>(dlsym(library, "nvmlDeviceGetMemoryInfo"));
    ready_ = init_ != nullptr && shutdown_ != nullptr && handle_by_bus_id_ != nullptr && memory_info_ != nullptr &&
             init_() == kNvmlSuccess;
  }
  // NOTE: the library is never dlclose'd: at exit that buys nothing, and code another
  // static destructor may still run would be unmapped.
  ~NvmlLibrary() {
    if (ready_) (void)shutdown_();
  }
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  std::optional<NvmlMemory> memory(int device) const {
    if (!ready_) return std::nullopt;
    char bus_id[64];  // "0000:41:00.0", which NVML also accepts
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
      (void)cudaGetLastError();  // clear it, so the next check reports its own problem
      return std::nullopt;
    }
    NvmlDevice handle = nullptr;
    NvmlMemoryInfo info{};
    if (handle_by_bus_id_(bus_id, &handle) != kNvmlSuccess || memory_info_(handle, &info) != kNvmlSuccess) {
      return std::nullopt;
    }
    return NvmlMemory{.used_bytes = info.used, .total_bytes = info.total};
  }

 private:
  NvmlReturn (*init_)() = nullptr;
  NvmlReturn (*shutdown_)() = nullptr;
  NvmlReturn (*handle_by_bus_id_)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*memory_info_)(NvmlDevice, NvmlMemoryInfo*) = nullptr;
  bool ready_ = false;
};

}  // namespace

std::optional<NvmlMemory> nvml_memory(int device) {
  static const NvmlLibrary library;
  return library.memory(device);
}

std::string describe_nvml_memory(int device) {
  std::optional<NvmlMemory> memory = nvml_memory(device);
  if (!memory) return "NVML unavailable";
  return "NVML: " + format_bytes(static_cast<int64_t>(memory->used_bytes)) + " used of " +
         format_bytes(static_cast<int64_t>(memory->total_bytes));
}

}  // namespace mg::cuda
