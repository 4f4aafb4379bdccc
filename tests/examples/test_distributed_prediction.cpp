// tests/examples/test_distributed_prediction.cpp — examples::predict_memory and fit_batch
// for one rank of a data-parallel job (examples/common/memory_prediction.h), called
// directly with a small float64 CNN: the steps get rank r of N as a SimulatedProcessGroup
// on the simulated device, mirroring MPI for a CPU target and NCCL for a GPU one; the
// bytes equal a CPU run of the same steps as that rank, ZeRO-1's OPTIMIZER_STATE is the
// rank's 1/N shard; the report says "per rank (rank r of N, DDP[, ZeRO-1])" and the JSON
// carries the distributed set-up; fit_batch finds the largest batch per rank; a rank
// outside the world is refused.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "distributed/prediction_test_support.h"
#include "examples/common/memory_prediction.h"

using mg::MemoryCategory;
using mg::distributed::Backend;
using mg::distributed::ProcessGroup;
using mg::distributed::SimulatedProcessGroup;
using mg_test::prediction::Peaks;
using mg_test::prediction::Training;
using Catch::Matchers::Contains;

namespace {

// What the steps saw of the group they were given, and the peaks of their training.
struct Seen {
  int rank = -1;
  int size = 0;
  mg::Device device = mg::Device::cpu();
  Backend mirrored = Backend::Auto;
  Peaks peaks;
};

// A program's data-parallel steps: the CNN on `device`, a batch of batch_size there, the
// training of prediction_test_support.h (DDP; with `zero` ZeRO-1 on DDP's gradients).
examples::DistributedStepsOnDevice cnn_steps(bool zero, Seen& seen) {
  return [zero, &seen](mg::Device device, int64_t batch_size, const std::shared_ptr<ProcessGroup>& group) {
    const auto& simulated = dynamic_cast<const SimulatedProcessGroup&>(*group);
    seen = {group->rank(), group->size(), group->device(), simulated.mirrored(), {}};
    std::shared_ptr<mg::nn::Module> model = mg_test::ddp::cnn(1);
    model->to(device);
    const mg_test::ddp::Batch batch{mg::empty({batch_size, 2, 8, 8}, {.dtype = mg::DType::Float64, .device = device}),
                                    mg::empty({batch_size}, {.dtype = mg::DType::Int64, .device = device})};
    seen.peaks = mg_test::prediction::training_peaks(model, group, zero ? Training::DdpAndZero : Training::Ddp, batch);
    return mg::memory::snapshot(device);
  };
}

std::string printed(const examples::MemoryPrediction& prediction, std::optional<int64_t> fit_capacity = std::nullopt) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  REQUIRE(out != nullptr);
  examples::print_prediction(out, prediction, fit_capacity);
  std::fclose(out);
  std::string text(buffer, size);
  std::free(buffer);
  return text;
}

}  // namespace

TEST_CASE("predict_memory for rank r of N: the CPU run's bytes as that rank, ZeRO-1's state sharded",
          "[examples][prediction]") {
  const bool zero = GENERATE(false, true);
  INFO((zero ? "DDP and ZeRO-1" : "DDP"));
  Seen seen;
  const examples::DistributedPrediction distributed{.world_size = 4, .rank = 3, .zero = zero};
  const examples::MemoryPrediction prediction =
      examples::predict_memory(mg::Device::cpu(), 8, distributed, cnn_steps(zero, seen));
  CHECK(seen.rank == 3);
  CHECK(seen.size == 4);
  CHECK(seen.device.is_simulated());
  CHECK(seen.mirrored == Backend::Mpi);
  REQUIRE(prediction.distributed.has_value());
  CHECK(prediction.batch_size == 8);

  // The same steps on the CPU as rank 3 of 4, tensors and values real.
  const auto batch = mg_test::ddp::draw_batch(8, 5, mg_test::ddp::image_input);
  const Peaks measured = mg_test::prediction::training_peaks(
      mg_test::ddp::cnn(1), std::make_shared<SimulatedProcessGroup>(3, 4, mg::Device::cpu()),
      zero ? Training::DdpAndZero : Training::Ddp, batch);
  INFO("measured " << describe(measured) << "\npredicted " << describe(seen.peaks));
  CHECK(seen.peaks == measured);
  // AdamW's two float64 moments: all 589 elements and a step counter per tensor (6), or
  // this rank's shards of the two groups (576 and 13 elements, each padded to 4 ranks)
  // and a counter per group.
  const int64_t state = prediction.memory.category(MemoryCategory::OptimizerState).peak;
  CHECK(state == (zero ? 2 * (144 + 4) * 8 + 2 * 4 : 2 * 589 * 8 + 6 * 4));

  const std::string report = printed(prediction);
  CHECK_THAT(report, Contains(zero ? "predicted peak memory per rank (rank 3 of 4, DDP, ZeRO-1) on cpu at batch 8 per rank"
                                   : "predicted peak memory per rank (rank 3 of 4, DDP) on cpu at batch 8 per rank"));
  mg::JsonWriter json;
  json.begin_object();
  examples::write_prediction_json(json, prediction);
  json.end_object();
  CHECK_THAT(json.str(), Contains(std::string("\"distributed\":{\"world_size\":4,\"rank\":3,\"ddp\":true,\"zero\":") +
                                  (zero ? "true" : "false") + "}"));
}

TEST_CASE("predict_memory for a rank of GPUs mirrors NCCL, and a plain prediction says nothing of ranks",
          "[examples][prediction]") {
  Seen seen;
  const examples::MemoryPrediction gpu =
      examples::predict_memory(mg::Device::cuda(), 4, {.world_size = 2, .rank = 0, .zero = true}, cnn_steps(true, seen));
  CHECK(seen.mirrored == Backend::Nccl);
  CHECK(gpu.memory.category(MemoryCategory::OptimizerState).peak == 2 * (288 + 7) * 8 + 2 * 4);
  CHECK_THAT(printed(gpu), Contains("per rank (rank 0 of 2, DDP, ZeRO-1) on cuda:0 at batch 4 per rank"));

  const examples::MemoryPrediction plain = examples::predict_memory(mg::Device::cpu(), 4, [](mg::Device device, int64_t) {
    return mg::memory::snapshot(device);
  });
  CHECK_FALSE(plain.distributed.has_value());
  CHECK_THAT(printed(plain), !Contains("per rank"));
}

TEST_CASE("fit_batch for rank r of N finds the largest batch per rank that fits, and a rank outside the world is refused",
          "[examples][prediction]") {
  Seen seen;
  const examples::DistributedPrediction distributed{.world_size = 2, .rank = 1, .zero = true};
  const examples::DistributedStepsOnDevice steps = cnn_steps(true, seen);
  const int64_t capacity = examples::predict_memory(mg::Device::cpu(), 20, distributed, steps).memory.peak_reserved_bytes;
  const examples::MemoryPrediction fit = examples::fit_batch(mg::Device::cpu(), capacity, distributed, steps, 1000);
  REQUIRE(fit.distributed.has_value());
  CHECK(fit.batch_size >= 20);
  CHECK(fit.memory.peak_reserved_bytes <= capacity);
  CHECK(examples::predict_memory(mg::Device::cpu(), fit.batch_size + 1, distributed, steps).memory.peak_reserved_bytes >
        capacity);
  CHECK_THAT(printed(fit, capacity), Contains("largest batch per rank that fits"));

  CHECK_THROWS_WITH(examples::predict_memory(mg::Device::cpu(), 4, {.world_size = 4, .rank = 4}, steps),
                    Contains("rank 4 of 4"));
  CHECK_THROWS_WITH(examples::predict_memory(mg::Device::cpu(), 4, {.world_size = 0, .rank = 0}, steps),
                    Contains("--world-size N with N >= 1"));
}
