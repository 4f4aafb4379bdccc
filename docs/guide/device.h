// docs/guide/device.h — pick_device(): the GPU when this build has CUDA and the machine has
// a GPU, else the CPU, so that every program of the guide runs on a CPU-only machine too.
#pragma once

#include <memgrad/memgrad.h>

// [guide: device]
#ifdef MG_WITH_CUDA
#include <memgrad/cuda/runtime.h>
#endif

inline mg::Device pick_device() {
#ifdef MG_WITH_CUDA  // defined by the memgrad target when it was built with CUDA
  if (mg::cuda::is_available()) return mg::Device::cuda();
#endif
  return mg::Device::cpu();
}
// [guide: end]
