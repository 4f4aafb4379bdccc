// core/kernels.cpp — finding a device's kernel table, and copies between devices.
#include "memgrad/core/kernels.h"

#include <cstring>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/simulated_kernels.h"
#include "memgrad/core/tensor.h"

namespace mg {

bool is_comparison(BinaryOp op) {
  switch (op) {
#define MG_BINARY_CASE(name, functor, ...) \
  case BinaryOp::name: return elementwise::kIsComparison<elementwise::functor>;
    MG_BINARY_OPS(MG_BINARY_CASE)
#undef MG_BINARY_CASE
  }
  return false;
}

const KernelTable& kernels(Device device) {
  switch (device.type) {
    case DeviceType::CPU: return cpu::kernel_table();
    case DeviceType::Simulated: return simulated_kernel_table();
    case DeviceType::CUDA:
#ifdef MG_WITH_CUDA
      return cuda::kernel_table();
#else
      break;
#endif
  }
  MG_CHECK(false, "no kernels for ", device,
           ": memgrad was built without CUDA support. Hint: rebuild with -DMG_WITH_CUDA=ON "
           "on a machine with the CUDA toolkit, or use the cpu device.");
}

void copy_across_devices(const Tensor& source, const Tensor& destination, bool non_blocking) {
  MG_ASSERT(source.sizes() == destination.sizes() && source.dtype() == destination.dtype(),
            "copy_across_devices needs equal sizes and dtypes");
  if (source.device() == destination.device()) {
    kernels(source.device()).copy(source, destination);
    return;
  }
  // The simulated device holds no bytes: moving to or from it moves sizes only.
  if (source.device().is_simulated() || destination.device().is_simulated()) return;
#ifdef MG_WITH_CUDA
  cuda::copy_between_devices(source, destination, non_blocking);
  return;
#endif
  MG_CHECK(false, "cannot copy from ", source.device(), " to ", destination.device(),
           ": memgrad was built without CUDA support");
}

}  // namespace mg
