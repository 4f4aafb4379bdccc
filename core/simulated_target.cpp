// core/simulated_target.cpp — installing a target's scratch model for the simulated device.
#include "core/simulated_target.h"

#include <atomic>

#include "core/error.h"

namespace mg {

namespace {

// Read by every simulated kernel call: one atomic load.
std::atomic<const ScratchModel*> active_model{nullptr};

const ScratchModel& model_for(Device target) {
  switch (target.type) {
    case DeviceType::CPU: return cpu_scratch_model();
    case DeviceType::CUDA: return cuda_scratch_model();
    case DeviceType::Simulated: break;
  }
  MG_CHECK(false, "the simulated device cannot stand in for ", target,
           ": a target is a real device. Hint: predict for cpu or cuda.");
}

}  // namespace

SimulatedTarget::SimulatedTarget(Device target) : target_(target), model_(&model_for(target)) {
  const ScratchModel* none = nullptr;
  MG_CHECK(active_model.compare_exchange_strong(none, model_), "a SimulatedTarget is already in force; "
           "the simulated device stands in for one device at a time. Hint: let the first one end.");
}

SimulatedTarget::~SimulatedTarget() {
  if (model_->reset != nullptr) model_->reset();
  active_model.store(nullptr);
}

std::string SimulatedTarget::describe() const { return model_->describe(); }

const ScratchModel* active_scratch_model() { return active_model.load(std::memory_order_acquire); }

}  // namespace mg
