// docs/guide/device.h — pick_device(): the GPU when this build has CUDA and the machine has
// a GPU, else the CPU, so that every program of the guide runs on a CPU-only machine too.
#pragma once

#include <memgrad/memgrad.h>

// [guide: device]
inline mg::Device pick_device() {
  // false in a build without CUDA too, so the program builds and runs either way
  return mg::cuda::is_available() ? mg::Device::cuda() : mg::Device::cpu();
}
// [guide: end]
