// autograd/save_on_cpu.h — keeping saved activations in host memory during the forward,
// as PyTorch's torch.autograd.graph.save_on_cpu.
//
// Under a SaveOnCpu guard, every intermediate CUDA tensor that autograd saves is copied to
// host memory at save time and the graph keeps only that copy; when an op's backward runs,
// its saved tensors are copied back to their device. Device ACTIVATION memory then stays
// near zero: an intermediate result's device bytes go back to the allocator as soon as the
// forward drops it, and the host copies count as ACTIVATION of host memory (of
// cuda::pinned_host_allocator() with pin_memory, of snapshot(Device::cpu()) without). In a
// prediction for a GPU the simulated device's saved tensors move to the simulated host
// alike (memory/simulated_target.h), so the prediction counts both sides.
//
//   {
//     mg::autograd::SaveOnCpu offload;
//     loss = cross_entropy(model(x), target);  // saved activations go to pinned host memory
//   }
//   loss.backward();                           // and come back one op at a time
//
// The price is transfer time: each saved byte crosses PCIe twice. With pin_memory (the
// default) both copies are asynchronous on the current stream and overlap compute; without
// it each copy waits, but needs no page-locked memory.
//
// NOTE: only TEMPORARY storages are copied, i.e. intermediate results nothing else holds
// on the device. Parameters, inputs, and tensors already saved plainly (ACTIVATION) stay
// where they are, as do CPU tensors: their device bytes stay alive anyway, so a host copy
// would cost transfers and host memory and give nothing back. (PyTorch copies every saved
// tensor, weights included.)
#pragma once

#include "memgrad/autograd/saved_tensor_hooks.h"

namespace mg::autograd {

class SaveOnCpu {
 public:
  explicit SaveOnCpu(bool pin_memory = true);

 private:
  SavedTensorHooks hooks_;
};

}  // namespace mg::autograd
