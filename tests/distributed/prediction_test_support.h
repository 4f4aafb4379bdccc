// tests/distributed/prediction_test_support.h — what the tests of per-rank memory
// prediction share (one process: test_simulated_process_group.cpp; under mpirun:
// mpi/test_memory_prediction.cpp): a few data-parallel training steps (DDP, ZeRO-1, or
// both; AdamW with two parameter groups) over any process group, measured as the peaks
// above what was alive before, per category; and the same steps run on a fresh simulated
// device standing in for the CPU with a SimulatedProcessGroup as rank r of N.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "distributed/ddp_test_support.h"
#include "memgrad/core/memory_category.h"
#include "memgrad/distributed/distributed_data_parallel.h"
#include "memgrad/distributed/simulated_process_group.h"
#include "memgrad/distributed/zero_redundancy_optimizer.h"
#include "memgrad/memory/simulated_target.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/optim/adam.h"
#include "memgrad/optim/param_groups.h"

namespace mg_test::prediction {

enum class Training { Ddp, Zero, DdpAndZero };

inline const char* training_name(Training training) {
  switch (training) {
    case Training::Ddp: return "DDP";
    case Training::Zero: return "ZeRO-1";
    case Training::DdpAndZero: return "DDP and ZeRO-1";
  }
  return "?";
}

// A run's peaks above the memory alive when it started: the allocator's allocated bytes
// and each category's requested bytes.
struct Peaks {
  int64_t allocated = 0;
  std::array<int64_t, mg::kNumMemoryCategories> by_category{};

  int64_t category(mg::MemoryCategory c) const { return by_category[static_cast<int>(c)]; }
  bool operator==(const Peaks&) const = default;
};

inline std::string describe(const Peaks& peaks) {
  std::string text = "allocated " + std::to_string(peaks.allocated);
  for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
    if (peaks.by_category[c] == 0) continue;
    text += std::string(", ") + mg::category_name(static_cast<mg::MemoryCategory>(c)) + " " +
            std::to_string(peaks.by_category[c]);
  }
  return text;
}

inline constexpr int kSteps = 3;  // the first creates the optimizer state; then steady steps

// `kSteps` AdamW steps (weight decay on matrices only: two parameter groups) of `model`,
// which is on group->device(), on `batch` (there too), data-parallel as `training` says.
// Returns the peaks above what was alive before (the model and the batch included).
inline Peaks training_peaks(std::shared_ptr<mg::nn::Module> model, std::shared_ptr<mg::distributed::ProcessGroup> group,
                            Training training, const ddp::Batch& batch) {
  const mg::Device device = group->device();
  const mg::memory::Snapshot before = mg::memory::snapshot(device);
  mg::memory::reset_peak_stats(device);
  {
    std::shared_ptr<mg::nn::Module> trained = model;
    if (training != Training::Zero) {
      trained = std::make_shared<mg::distributed::DistributedDataParallel>(model, group);
    }
    const auto groups = mg::optim::weight_decay_groups(*trained, mg::optim::AdamWOptions{.lr = 1e-3, .weight_decay = 0.1});
    std::unique_ptr<mg::optim::Optimizer> optimizer;
    if (training == Training::Ddp) {
      optimizer = std::make_unique<mg::optim::AdamW>(groups);
    } else {
      optimizer = mg::distributed::make_zero_redundancy_optimizer<mg::optim::AdamW>(
          group, groups, {.gradients_already_reduced = training == Training::DdpAndZero});
    }
    for (int step = 0; step < kSteps; ++step) {
      optimizer->zero_grad();
      ddp::loss_of(*trained, batch).backward();
      optimizer->step();
    }
  }
  const mg::memory::Snapshot after = mg::memory::snapshot(device);
  Peaks peaks{.allocated = after.peak_allocated_bytes - before.allocated_bytes};
  for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
    peaks.by_category[c] = after.by_category[c].peak - before.by_category[c].current;
  }
  return peaks;
}

// The prediction of training_peaks for rank `rank` of `world_size` on the CPU: the same
// model (its shapes) and batch (its shapes) on a fresh simulated device standing in for
// the CPU, over a SimulatedProcessGroup mirroring the MPI backend.
inline Peaks predicted_peaks(const ddp::ModelFactory& make_model, Training training, const ddp::Batch& batch, int rank,
                             int world_size) {
  const mg::Device simulated = mg::Device::simulated(6);
  mg::SimulatedTarget standing_in(mg::Device::cpu(), simulated, size_t{1} << 40);
  std::shared_ptr<mg::nn::Module> model = make_model(/*seed=*/1);
  model->to(simulated);
  const ddp::Batch placeholder{mg::empty(batch.input.sizes(), {.dtype = batch.input.dtype(), .device = simulated}),
                               mg::empty(batch.target.sizes(), {.dtype = batch.target.dtype(), .device = simulated})};
  auto group = std::make_shared<mg::distributed::SimulatedProcessGroup>(rank, world_size, simulated,
                                                                        mg::distributed::Backend::Mpi);
  return training_peaks(model, group, training, placeholder);
}

}  // namespace mg_test::prediction
