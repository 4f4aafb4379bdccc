// memory/simulated_target.cpp — a simulated device made to behave as a target: its allocator's
// segment placement and its kernels' scratch model.
#include "memgrad/memory/simulated_target.h"

#include <atomic>

#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/error.h"
#include "memgrad/core/simulated_kernels.h"

namespace mg {

namespace {

// Read by every simulated kernel call: one atomic load.
std::atomic<const ScratchModel*> active_model{nullptr};

// Room for any host a prediction models: far above what a machine holds.
constexpr size_t kSimulatedHostCapacity = size_t{4} << 40;

const ScratchModel& model_for(Device target) {
  switch (target.type) {
    case DeviceType::CPU: return cpu_scratch_model();
    case DeviceType::CUDA: return cuda_scratch_model();
    case DeviceType::Simulated: break;
  }
  MG_CHECK(false, "the simulated device cannot stand in for ", target,
           ": a target is a real device. Hint: predict for cpu or cuda.");
}

// The host's malloc takes segment-sized blocks from mmap, which maps each one below the
// last; cudaMalloc hands out rising addresses.
SegmentPlacement placement_for(Device target) {
  return target.is_cpu() ? SegmentPlacement::Descending : SegmentPlacement::Ascending;
}

}  // namespace

SimulatedTarget::SimulatedTarget(Device target, Device simulated, size_t capacity_bytes)
    : target_(target), model_(&model_for(target)) {
  MG_CHECK(simulated.is_simulated(), "SimulatedTarget: ", simulated, " is not a simulated device. Hint: pass "
           "Device::simulated(index).");
  const ScratchModel* none = nullptr;
  MG_CHECK(active_model.compare_exchange_strong(none, model_), "a SimulatedTarget is already in force; "
           "the simulated device stands in for one device at a time. Hint: let the first one end.");
  try {
    set_simulated_capacity(simulated.index, capacity_bytes, placement_for(target));
    if (target.is_cuda()) set_simulated_capacity(kSimulatedHostIndex, kSimulatedHostCapacity, placement_for(Device::cpu()));
  } catch (...) {
    active_model.store(nullptr);
    throw;
  }
  set_simulated_scratch_kernels(&model_->kernels);
}

SimulatedTarget::~SimulatedTarget() {
  set_simulated_scratch_kernels(nullptr);
  if (model_->reset != nullptr) model_->reset();
  active_model.store(nullptr);
}

std::string SimulatedTarget::describe() const { return model_->describe(); }

const ScratchModel* active_scratch_model() { return active_model.load(std::memory_order_acquire); }

bool runs_as_cuda(Device device) {
  return device.is_cuda() || (device.is_simulated() && active_scratch_model() == &cuda_scratch_model());
}

Device simulated_host_of(Device simulated) {
  MG_CHECK(simulated.is_simulated(), "simulated_host_of(", simulated, "): not a simulated device. Hint: a real "
           "device's host is Device::cpu().");
  return active_scratch_model() == &cpu_scratch_model() ? simulated : Device::simulated(kSimulatedHostIndex);
}

}  // namespace mg
