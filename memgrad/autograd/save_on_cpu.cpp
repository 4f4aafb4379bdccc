// autograd/save_on_cpu.cpp — the pack and unpack hooks behind SaveOnCpu.
//
// A copied tensor travels as one flat run of its bytes in the order they lie in memory
// (row-major, or channels-last for a channels-last activation), so the layout the forward
// chose comes back unchanged and each direction is a single copy.
//
// In a prediction for a GPU (the simulated device standing in for one) the copies go to and
// come from the simulated host (memory/simulated_target.h), where their bytes are counted,
// and each is issued as a simulated copy kernel, which moves nothing but reports the
// transfer to a step's cost (memory/step_cost.h).
#include "memgrad/autograd/save_on_cpu.h"

#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/memory/simulated_target.h"
#ifdef MG_WITH_CUDA
#include "memgrad/cuda/runtime.h"
#endif

namespace mg::autograd {

namespace {

struct HostCopy {
  Tensor host;          // (numel) the saved bytes in host memory, tagged ACTIVATION
  Device device;        // where unpack puts them back
  Shape sizes;
  MemoryFormat format;  // the layout they came in
#ifdef MG_WITH_CUDA
  // The end of the device-to-host copy on the stream that packed; the copy back waits for
  // it, in case backward runs on another stream.
  cuda::Event copied;
#endif
};

// A simulated copy between the simulated device and its host: nothing moves, the transfer
// is reported (to a StepCostMeter, if one is alive).
void report_simulated_transfer(const Tensor& source, const Tensor& destination) {
  kernels(source.device()).copy(source, destination);
}

std::any pack_to_host(const Tensor& saved, bool pin_memory) {
  if (!runs_as_cuda(saved.device()) || saved.memory_category() != MemoryCategory::Temporary) return saved;
  const bool simulated = saved.device().is_simulated();
  MemoryFormat format = suggest_memory_format(saved);
  Tensor dense = is_contiguous_in(saved, format) ? saved : contiguous_copy(saved);
  Tensor flat = make_view(dense, {dense.numel()}, {1}, dense.storage_offset());
  auto copy = std::make_shared<HostCopy>();
  copy->host = empty({dense.numel()}, {.dtype = saved.dtype(),
                                       .device = simulated ? simulated_host_of(saved.device()) : Device::cpu(),
                                       .category = MemoryCategory::Activation,
                                       .pin_memory = pin_memory && !simulated});
  if (simulated) {
    report_simulated_transfer(flat, copy->host);
  } else {
    copy_across_devices(flat, copy->host, /*non_blocking=*/pin_memory);
  }
  copy->device = saved.device();
  copy->sizes = saved.sizes();
  copy->format = format;
#ifdef MG_WITH_CUDA
  if (!simulated) copy->copied.record(cuda::Stream::current(saved.device()));
#endif
  return std::shared_ptr<const HostCopy>(std::move(copy));
}

Tensor unpack_from_host(const std::any& packed, bool pin_memory) {
  if (const Tensor* passed_through = std::any_cast<Tensor>(&packed)) return *passed_through;
  const HostCopy& copy = *std::any_cast<const std::shared_ptr<const HostCopy>&>(packed);
  if (copy.device.is_simulated()) {
    Tensor flat = empty({copy.host.numel()}, {.dtype = copy.host.dtype(), .device = copy.device});
    report_simulated_transfer(copy.host, flat);
    return make_view(flat, copy.sizes, strides_for(copy.sizes, copy.format), 0);
  }
#ifdef MG_WITH_CUDA
  copy.copied.block(cuda::Stream::current(copy.device));
#endif
  Tensor flat = converted_copy(copy.host, copy.host.dtype(), copy.device, /*non_blocking=*/pin_memory);
  return make_view(flat, copy.sizes, strides_for(copy.sizes, copy.format), 0);
}

}  // namespace

SaveOnCpu::SaveOnCpu(bool pin_memory)
    : hooks_([pin_memory](const Tensor& saved) { return pack_to_host(saved, pin_memory); },
             [pin_memory](const std::any& packed) { return unpack_from_host(packed, pin_memory); }) {}

}  // namespace mg::autograd
