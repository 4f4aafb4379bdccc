// cuda/nvml.h — a device's memory as NVML sees it: used by every process on the GPU, not
// only memgrad, which is what an out-of-memory report needs when another process holds
// memory.
//
// libnvidia-ml.so.1 comes with the driver, not the toolkit (nor do its headers), so memgrad
// loads it at run time with dlopen and declares the few functions it calls itself: the
// build needs no NVML, and a machine without it only loses this line of the reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mg::cuda {

struct NvmlMemory {
  uint64_t used_bytes;
  uint64_t total_bytes;
};

// NVML's used and total memory of CUDA device `device` (found by its PCI bus id: NVML's
// indices ignore CUDA_VISIBLE_DEVICES), or nothing when NVML is unavailable (no library,
// initialisation failed) or does not know the device. Never throws.
std::optional<NvmlMemory> nvml_memory(int device);

// "NVML: 20.00 GiB used of 140.00 GiB", or "NVML unavailable".
std::string describe_nvml_memory(int device);

}  // namespace mg::cuda
